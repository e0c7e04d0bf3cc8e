"""One table of a sweep or attention grid as a line chart: one series per row (the sizes of a sweep, the
head dims of an attention grid), the columns (ctx, seq) along x, the cell's value up y.

A cell without a value (OOM, error, cancelled, not run) is a gap: the series' line breaks there and
the legend names the cell and why, in words, so the gap reads the same without colour. The x axis is
one tick per column, evenly spaced: contexts and sequence lengths double from one column to the next,
so even spacing is their log scale. Values that span a decade or more go on a log scale too, or the
smaller sizes would all sit on the floor under the largest.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Text
from textual.widget import Widget

from perfconsole.core.reports.sweep import GridCell, GridTable
from perfconsole.tui.glyphs import UNICODE, Glyphs

SERIES_STYLES = ("dodger_blue1", "magenta", "yellow", "green", "cyan", "orange1", "white", "purple")
# "no_value": a cell that ran fine but has no figure for these values (peak memory on the CPU), not an error.
GAP_ORDER = ("oom", "error", "cancelled", "unsupported", "running", "not_run", "no_value")
LISTED_GAPS = 4          # more gaps of one kind than this are counted, not listed
MIN_PLOT_ROWS = 3


@dataclass(frozen=True)
class ChartGlyphs:
    markers: str         # one per series, so series tell apart without colour
    line: str            # the dotted line between a series' points
    v: str               # y axis
    h: str               # x axis
    corner: str
    ytick: str
    xtick: str


UNICODE_CHART = ChartGlyphs("●■▲◆✚★○□", "·", "│", "─", "└", "┤", "┬")
ASCII_CHART = ChartGlyphs("ox+*#@%&", ".", "|", "-", "+", "+", "+")


def chart_glyphs(glyphs: Glyphs) -> ChartGlyphs:
    """The chart's characters for the console's glyph set: ASCII where the console draws ASCII."""
    return ASCII_CHART if glyphs.full.isascii() else UNICODE_CHART


def plain_ascii(text: str) -> str:
    """Core's titles separate with a middle dot ("train · fp32"); ASCII mode draws a slash."""
    return text.replace(" · ", " / ").encode("ascii", "replace").decode()


def gap_kind(cell: GridCell) -> str:
    """Why a cell is a gap on the chart: its status, or "no_value" for an ok cell with no figure."""
    if cell.status == "ok":
        return "no_value"
    return cell.status if cell.status in GAP_ORDER else "error"


def chart_value(cell: GridCell) -> float | None:
    """A cell's value on the chart: the sum of its values (forward + backward for attention), None for a gap."""
    if cell.status != "ok" or not cell.values or any(v is None for v in cell.values):
        return None
    return float(sum(v for v in cell.values if v is not None))


def tick(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


class Scale:
    """Maps values to plot rows, linear from zero or logarithmic between the extremes."""

    def __init__(self, values: list[float], rows: int) -> None:
        lo, hi = min(values), max(values)
        self.log = lo > 0 and hi / lo >= 10
        self.lo, self.hi = (lo, hi) if self.log else (min(0.0, lo), hi)
        self.rows = rows

    def _f(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def frac(self, v: float) -> float:
        span = self._f(self.hi) - self._f(self.lo)
        return 0.5 if span <= 0 else (self._f(v) - self._f(self.lo)) / span

    def row(self, v: float) -> int:
        """0 is the bottom row."""
        return round(self.frac(v) * (self.rows - 1))

    def value_at(self, row: int) -> float:
        f = row / max(1, self.rows - 1)
        if self.log:
            return 10 ** (math.log10(self.lo) + f * (math.log10(self.hi) - math.log10(self.lo)))
        return self.lo + f * (self.hi - self.lo)


def _wrap(items: list[list[tuple[str, str]]], width: int, indent: int) -> list[Text]:
    """Legend items (each a list of (text, style) pieces) packed into lines of at most `width` cells."""
    lines: list[Text] = []
    line = Text(no_wrap=True, overflow="crop")
    for item in items:
        n = sum(len(t) for t, _ in item)
        if line.cell_len and line.cell_len + 2 + n > width:
            lines.append(line)
            line = Text(" " * indent, no_wrap=True, overflow="crop")
        elif line.cell_len > indent:
            line.append("  ")
        for t, style in item:
            line.append(t, style=style)
    lines.append(line)
    return lines


def legend(table: GridTable, width: int, cg: ChartGlyphs, words: Mapping[str, str],
           styles: Mapping[str, str]) -> list[Text]:
    """A line (or more) naming each series by its marker, then the gaps by kind and cell."""
    head = f"{table.row_name}: "
    items = [[(cg.markers[i % len(cg.markers)], SERIES_STYLES[i % len(SERIES_STYLES)]), (f" {row}", "")]
             for i, row in enumerate(table.rows)]
    items[0].insert(0, (head, "bold"))
    lines = _wrap(items, width, len(head))
    gaps: dict[str, list[str]] = {}
    for row, cells in zip(table.rows, table.cells):
        for col, cell in zip(table.cols, cells):
            if chart_value(cell) is None:
                status = gap_kind(cell)
                gaps.setdefault(status, []).append(f"{row} {table.col_name} {col}")
    if gaps:
        parts: list[list[tuple[str, str]]] = []
        for status in GAP_ORDER:
            cells = gaps.get(status, [])
            if not cells:
                continue
            shown = cells if len(cells) <= LISTED_GAPS else [f"{len(cells)} cells"]
            parts.append([(words.get(status, status.replace("_", " ")), styles.get(status, "dim")),
                          (": " + ", ".join(shown), "")])
        parts[0].insert(0, ("gaps ", "bold"))
        lines += _wrap(parts, width, 5)
    return lines


def chart_text(table: GridTable, x_label: str, y_label: str, width: int, height: int, glyphs: Glyphs,
               words: Mapping[str, str], styles: Mapping[str, str]) -> Text:
    """The chart in `width` x `height` cells: title, plot with y ticks, x axis and ticks, legend."""
    cg = chart_glyphs(glyphs)
    if cg is ASCII_CHART:
        table = replace(table, title=plain_ascii(table.title))
    width = max(width, 30)
    series = [[chart_value(c) for c in cells] for cells in table.cells]
    present = [v for s in series for v in s if v is not None]
    keys = legend(table, width, cg, words, styles)
    out = Text(no_wrap=True, overflow="crop")
    if not present:
        out.append(f"{table.title}: {y_label}\n", style="bold")
        out.append("no cell of this table has a value\n", style="dim")
        return _join(out, keys)
    rows = max(MIN_PLOT_ROWS, height - 3 - len(keys))
    scale = Scale(present, rows)
    note = "; y on a log scale" if scale.log else ""
    titles = [f"{table.title}: {y_label} against {x_label}{note}", f"{table.title}: {y_label}{note}",
              f"{y_label}{note}"]
    out.append(next((t for t in titles if len(t) <= width), titles[-1]), style="bold")
    out.append("\n")
    # Tick labels every few rows, always at the top and bottom.
    n_ticks = max(2, min(6, rows // 3 + 1))
    tick_rows = {round(i * (rows - 1) / (n_ticks - 1)) for i in range(n_ticks)}
    labels = {r: tick(scale.value_at(r)) for r in tick_rows}
    yw = max(map(len, labels.values())) + 1
    axis_name = table.col_name
    plot_w = max(10, width - yw - 1 - len(axis_name) - 2)  # the axis's name follows its last tick
    col_labels = [str(c) for c in table.cols]
    pad = max(map(len, col_labels)) // 2 + 1
    n = len(table.cols)
    xs = ([plot_w // 2] if n == 1 else
          [pad + round(i * (plot_w - 1 - 2 * pad) / (n - 1)) for i in range(n)])
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * plot_w for _ in range(rows)]
    # Lines first, markers over them, so a point is never hidden by another series' line.
    for i, vals in enumerate(series):
        style = SERIES_STYLES[i % len(SERIES_STYLES)]
        for a in range(n - 1):
            va, vb = vals[a], vals[a + 1]
            if va is None or vb is None:
                continue  # a gap breaks the line
            fa, fb = scale.frac(va), scale.frac(vb)
            for x in range(xs[a] + 1, xs[a + 1]):
                f = fa + (fb - fa) * (x - xs[a]) / (xs[a + 1] - xs[a])
                r = round(f * (rows - 1))
                if grid[rows - 1 - r][x][0] == " ":
                    grid[rows - 1 - r][x] = (cg.line, style)
    for i, vals in enumerate(series):
        mark = (cg.markers[i % len(cg.markers)], SERIES_STYLES[i % len(SERIES_STYLES)])
        for x, v in zip(xs, vals):
            if v is not None:
                grid[rows - 1 - scale.row(v)][x] = mark
    for line_no, cells in enumerate(grid):
        r = rows - 1 - line_no
        if r in labels:
            out.append(f"{labels[r]:>{yw - 1}} {cg.ytick}", style="dim")
        else:
            out.append(" " * yw + cg.v, style="dim")
        for ch, style in cells:
            out.append(ch, style=style)
        out.append("\n")
    axis = [cg.h] * plot_w
    for x in xs:
        axis[x] = cg.xtick
    out.append(" " * yw + cg.corner + "".join(axis) + "\n", style="dim")
    ticks = [" "] * (plot_w + 1)
    for x, lab in zip(xs, col_labels):
        start = max(0, min(plot_w + 1 - len(lab), x + 1 - len(lab) // 2))
        ticks[start:start + len(lab)] = list(lab)
    out.append(" " * yw + "".join(ticks).rstrip() + "  ", style="dim")
    out.append(axis_name + "\n", style="bold")
    return _join(out, keys)


def _join(out: Text, lines: list[Text]) -> Text:
    for i, line in enumerate(lines):
        out.append_text(line)
        if i < len(lines) - 1:
            out.append("\n")
    return out


class GridChart(Widget):
    """Draws `chart_text` for the space it is given; the grids pane sets what it shows."""
    DEFAULT_CSS = "GridChart { height: 16; }"

    def __init__(self, glyphs: Glyphs = UNICODE, **kw: Any) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.grid_table: GridTable | None = None
        self.x_label = self.y_label = ""
        self.status_words: Mapping[str, str] = {}
        self.status_styles: Mapping[str, str] = {}

    def show(self, table: GridTable | None, x_label: str, y_label: str, words: Mapping[str, str],
             styles: Mapping[str, str]) -> None:
        self.grid_table, self.x_label, self.y_label = table, x_label, y_label
        self.status_words, self.status_styles = words, styles
        self.refresh()

    def render(self) -> Text:
        if self.grid_table is None:
            return Text("")
        w, h = self.size.width or 80, self.size.height or 16
        return chart_text(self.grid_table, self.x_label, self.y_label, w, h, self.glyphs, self.status_words,
                          self.status_styles)

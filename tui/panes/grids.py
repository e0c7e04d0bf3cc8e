"""A sweep or an attention grid as grids: for a sweep, one table per (mode, precision) with sizes as
rows and contexts as columns; for an attention grid, one per variant with d as rows and seq as
columns. `t` switches what the cells hold; `c` shows one table at a time as a chart (`n` for the next
table). Cells that did not run show their status as a word as well as a colour (OOM, error, cancelled,
not run), so monochrome and ASCII terminals show it too; on the chart they are gaps the legend names."""
from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.constrain import Constrain
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.widgets import Static

from perfconsole.core.reports import attention as report_attention
from perfconsole.core.reports import ladder as report_ladder
from perfconsole.core.reports import scaling_bars
from perfconsole.core.reports import sweep as report_sweep
from perfconsole.core.reports.sweep import GRID_STATUSES, GridCell, GridTable, grid_status
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.grid_chart import GridChart
from perfconsole.tui.widgets.scale_table import scale_table
from perfconsole.tui.widgets.sol_bars import busy_text, sol_table

STATUS_WORD = {"ok": "ok", "oom": "OOM", "error": "error", "cancelled": "cancelled", "not_run": "not run",
               "running": "running", "pending": "pending", "unsupported": "unsupported", "no_value": "no value"}
STATUS_STYLE = {"ok": "green", "oom": "bold red", "error": "bold red", "cancelled": "magenta", "not_run": "dim",
                "running": "yellow", "pending": "yellow", "unsupported": "yellow", "no_value": "dim"}
# The header's counts, in this order; "pending": a cell waiting its turn while the grid runs.
COUNT_ORDER = (*GRID_STATUSES[:4], "unsupported", "running", "pending", GRID_STATUSES[4])
UNFINISHED = ("running", "pending", "not_run")
EMPTY = "open a sweep, an attention grid, a ladder or a scaling curve in Runs (5, o) and press Enter on it"
# The chart plots one number per cell: an attention cell's forward and backward add up to its step.
CHART_LABELS = {"fwd_bwd_ms": "forward + backward (ms)"}
CHART_MIN_H = 14
NATURAL_MAX = 10_000     # "as wide as it likes" when measuring a table's own width


LADDER_METRICS = {"step_ms": "median step time (ms)"}
# The kinds drawn as one table of rows (a run each), not as grids of cells.
ROW_KINDS = ("ladder", "scale")


def metrics_of(grid: Any) -> dict[str, str]:
    if grid.kind in ROW_KINDS:
        return LADDER_METRICS
    return report_sweep.SWEEP_METRICS if grid.kind == "sweep" else report_attention.ATTENTION_METRICS


def cells_of(grid: Any) -> list[Any]:
    return grid.runs if grid.kind in ("sweep", *ROW_KINDS) else grid.cells


def _short_ms(v: float) -> str:
    """About three significant digits, so six forward/backward pairs fit across 80 columns."""
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _fmt(metric: str, v: float) -> str:
    if metric == "step_ms":
        return f"{v:,.2f}"
    if metric == "fwd_bwd_ms":
        return _short_ms(v)
    return f"{v:,.0f}"


def cell_text(cell: GridCell, metric: str) -> Text:
    """The value(s) of an ok cell; otherwise the status word, after any value measured before it stopped
    (an attention cell that ran out of memory in the backward keeps its forward: `28.9/OOM`)."""
    if cell.status == "ok":
        return Text("/".join("-" if v is None else _fmt(metric, v) for v in cell.values), justify="right")
    parts = [_fmt(metric, v) for v in cell.values if v is not None] + [STATUS_WORD[cell.status]]
    return Text("/".join(parts), style=STATUS_STYLE[cell.status], justify="right")


def render_grid(table: GridTable, metric: str, min_width: int = 0) -> Table:
    t = Table(title=table.title, title_justify="left", title_style="bold", box=None, pad_edge=False,
              show_edge=False, padding=(0, 1), expand=False)
    t.add_column(Text(f"{table.row_name} \\ {table.col_name}"), style="bold", no_wrap=True)
    for col in table.cols:
        t.add_column(Text(str(col), justify="right"), justify="right", no_wrap=True, min_width=min_width)
    for row, cells in zip(table.rows, table.cells):
        t.add_row(str(row), *(cell_text(c, metric) for c in cells))
    return t


def tables_of(grid: Any, metric: str) -> list[GridTable]:
    mod = report_sweep if grid.kind == "sweep" else report_attention
    return mod.grid_tables(grid, metric)


def findings_of(grid: Any) -> list[str]:
    mod = report_sweep if grid.kind == "sweep" else report_attention
    return mod.findings(grid)


def setup_line(grid: Any) -> str:
    if grid.kind == "scale":
        b = grid.spec.base
        return (f"{b.precision} batch {b.batch}{' global' if grid.spec.strong else '/rank'} ctx {b.ctx}, "
                f"{b.warmup} warm-up + {b.steps} steps, {b.parallel} over {','.join(map(str, grid.spec.counts))}")
    if grid.kind == "ladder":
        b = grid.spec.base
        return f"{b.precision} batch {b.batch} ctx {b.ctx}, {b.warmup} warm-up + {b.steps} steps x{b.repeat}"
    if grid.kind == "sweep":
        b = grid.spec.base
        return f"batch {b.batch}, {','.join(map(str, grid.spec.warmups))} warm-up + {b.steps} steps"
    sp = grid.spec
    return f"batch {sp.batch}, {sp.warmup} warm-up + {sp.iters} passes"


def climbing(grid: Any) -> bool:
    """The grid is under way (or about to be): its cells not started yet are waiting, not left out."""
    return grid.status in ("running", "pending")


def shown_status(grid: Any, status: str) -> str:
    """A cell's status as the header and the ladder's rows say it: a pending cell of a grid that runs is
    "pending", of one that stopped (cancelled, or read from disk) "not run"; a running one "running"."""
    s = grid_status(status)
    return "pending" if s == "not_run" and status == "pending" and climbing(grid) else s


def counts_line(grid: Any) -> str:
    counts: dict[str, int] = {}
    for c in cells_of(grid):
        s = shown_status(grid, c.status)
        counts[s] = counts.get(s, 0) + 1
    total = sum(counts.values())
    finished = total - sum(counts.get(s, 0) for s in UNFINISHED)
    return f"{finished}/{total} cells finished: " + ", ".join(
        f"{counts[s]} {STATUS_WORD[s]}" for s in COUNT_ORDER if counts.get(s))


def jobs_line(counts: dict[str, int] | None) -> str:
    """" · slurm jobs: 2 pending, 1 running, 3 done" for a grid run as Slurm jobs, else ""."""
    if not counts:
        return ""
    return f" · slurm jobs: {counts['pending']} pending, {counts['running']} running, {counts['done']} done"


class GridsPane(ScrollableContainer):
    """Scrolls both ways (arrows, PgUp/PgDn, Home/End) so wide grids stay readable at 80x24."""
    BINDINGS = [
        Binding("t", "next_metric", "Values", id="grids.metric"),
        Binding("c", "toggle_chart", "Chart", id="grids.chart"),
        Binding("n", "next_table", "Next table", id="grids.next_table"),
        Binding("e", "app.export_grid", "Export", id="grids.export"),
        Binding("s", "app.save_grid", "Save", id="grids.save"),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.grid: Any = None
        self.metric = ""
        self.chart = False       # the tables, or one of them as a chart
        self.table_index = 0     # which table the chart shows

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="grids-head", classes="title")
        yield Static("", id="grids-body")
        yield GridChart(self.glyphs, id="grids-chart")
        yield Static("", id="grids-findings")

    def show(self, grid: Any) -> None:
        if grid is not self.grid:
            self.metric = next(iter(metrics_of(grid))) if grid is not None else ""
            self.table_index = 0
        self.grid = grid
        self._draw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # `n` only means something on the chart; the footer leaves it out under the tables.
        return self.chart if action == "next_table" else True

    def action_toggle_chart(self) -> None:
        if self.grid is None:
            self.app.notify("no grid open", severity="warning")
            return
        if self.grid.kind in ROW_KINDS:
            bars = "speed of light" if self.grid.kind == "ladder" else "each count's step"
            self.app.notify(f"a {self.grid.kind} has no chart; its bars are {bars}", severity="warning")
            return
        self.chart = not self.chart
        self.refresh_bindings()
        self._draw()

    def action_next_table(self) -> None:
        if self.grid is None or not self.chart:
            return
        self.table_index += 1
        self._draw()

    def action_next_metric(self) -> None:
        if self.grid is None:
            self.app.notify("no grid open", severity="warning")
            return
        names = list(metrics_of(self.grid))
        self.metric = names[(names.index(self.metric) + 1) % len(names)]
        self._draw()

    def _draw(self) -> None:
        head = self.query_one("#grids-head", Static)
        body = self.query_one("#grids-body", Static)
        notes = self.query_one("#grids-findings", Static)
        g = self.grid
        if g is None:
            head.update(EMPTY)
            body.update("")
            notes.update("")
            self.set_class(False, "-chart")
            return
        env = g.environment
        device = env.get("gpu_name") or env.get("cpu") or "?"
        metrics = metrics_of(g)
        others = ", ".join(v for k, v in metrics.items() if k != self.metric)
        text = Text()
        text.append(g.name, style="bold")
        text.append(f"\n{device} · torch {env.get('torch', '?')} · {setup_line(g)} · {g.status} · {counts_line(g)}"
                    f"{jobs_line(getattr(self.app, 'grid_jobs', {}).get(g.id))}\n")
        if g.kind in ROW_KINDS:
            head.update(text)
            self.set_class(False, "-chart")
            body.update(ladder_view(g, self.glyphs) if g.kind == "ladder" else Unsqueezed(
                *scale_table(g, self.glyphs, lambda status: STATUS_WORD[shown_status(g, status)])))
            notes.update("")
            return
        tables = tables_of(g, self.metric)
        if self.chart:
            self._draw_chart(text, tables, metrics[self.metric], others)
            head.update(text)
            self.set_class(True, "-chart")
            body.update("")
        else:
            text.append("cells: ")
            text.append(metrics[self.metric], style="bold")
            text.append(f"   (t: {others})")
            head.update(text)
            self.set_class(False, "-chart")
            self._draw_tables(body, tables)
        lines = Text("Findings\n", style="bold")
        for f in findings_of(g):
            lines.append(f"- {f}\n", style="")
        notes.update(lines)

    def _draw_chart(self, head: Text, tables: list[GridTable], label: str, others: str) -> None:
        """One table as a chart; the head says which of how many, and the keys that move on."""
        chart = self.query_one("#grids-chart", GridChart)
        if not tables:
            chart.show(None, "", "", STATUS_WORD, STATUS_STYLE)
            return
        self.table_index %= len(tables)
        table = tables[self.table_index]
        head.append(f"chart {self.table_index + 1}/{len(tables)}", style="bold")
        head.append(f"   (n: next, c: tables; t: {others})")
        chart.show(table, f"{table.col_name} (tokens)", CHART_LABELS.get(self.metric, label), STATUS_WORD,
                   STATUS_STYLE)
        self.call_after_refresh(self._fit_chart)

    def on_resize(self) -> None:
        if self.chart:
            self.call_after_refresh(self._fit_chart)

    def _fit_chart(self) -> None:
        """The chart takes the pane's height below the head (fr heights do not apply in a scrolling pane)."""
        head = self.query_one("#grids-head", Static)
        room = self.scrollable_content_region.height - head.outer_size.height
        self.query_one("#grids-chart", GridChart).styles.height = max(CHART_MIN_H, room)

    def _draw_tables(self, body: Static, tables: list[GridTable]) -> None:
        # One width for every value column of every table, so the tables line up for comparing.
        width = max((cell_text(c, self.metric).cell_len for t in tables for row in t.cells for c in row), default=0)
        parts: list[Any] = []
        for i, table in enumerate(tables):
            if i:
                parts.append(Text(""))
            parts.append(render_grid(table, self.metric, width))
        body.update(Group(*parts))


class Unsqueezed:
    """A table as wide as its columns need, then the rest: the pane (width auto) takes the table's width and
    scrolls sideways rather than cutting every column short ("rung st… st…") at 80 columns; the rest wraps
    to the width the pane shows, so the lines under the table read without scrolling."""

    def __init__(self, table: Table, rest: list[Any]) -> None:
        self.table, self.rest = table, rest
        self.view: int | None = None  # the pane's width, learnt when Textual measures this

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        self.view = options.max_width
        natural = Measurement.get(console, options.update_width(NATURAL_MAX), self.table).maximum
        width = max(natural, Measurement.get(console, options, Group(*self.rest)).maximum)
        return Measurement(width, width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table
        yield Constrain(Group(*self.rest), min(options.max_width, self.view or options.max_width))


def ladder_view(ladder: Any, glyphs: Glyphs) -> Unsqueezed:
    """The ladder's table, its columns kept whole (the pane scrolls sideways), then each rung that ran as
    speed-of-light bars with its GPU busy share."""
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1), title_justify="left", expand=False)
    for name in ("rung", "status", "step ms", "vs first", "vs prev", "MFU", "SoL", "GPU busy", "loss", "moved ms/step"):
        t.add_column(name, justify="left" if name in ("rung", "status", "moved ms/step") else "right", no_wrap=True)
    rows = report_ladder.rows(ladder)
    for row in rows:
        ok = row.status == "ok"
        word = "ok" if ok else STATUS_WORD[shown_status(ladder, "pending")] if row.status == "pending" else (
            report_ladder.status_text(row))
        t.add_row(report_ladder.rung_text(row), Text(word, style="green" if ok else "yellow"),
                  "-" if row.median_ms is None else f"{row.median_ms:,.2f}",
                  *report_ladder.speedup_cells(row),
                  "-" if row.mfu is None else f"{100 * row.mfu:.1f}%",
                  "-" if row.sol_fraction is None else f"{100 * row.sol_fraction:.1f}%",
                  report_ladder.busy_text(row),
                  "-" if row.numerics is None else row.numerics, report_ladder.moved_text(row))
    parts: list[Any] = [Text(line) for line in report_ladder.carry_notes(rows)]
    found = report_ladder.verdicts(rows)
    parts += [Text(line, style="yellow") for line in found.over_counted]
    parts += [Text(line, style="bold") for line in found.best]
    if ladder.spec.base.nproc > 1:  # the data-parallel ladder: each rung's job beside its one-process program
        parts += [Text(""), Text(f"weak scaling over {ladder.spec.base.nproc} processes", style="bold"),
                  *(Text(line) for line in scaling_bars.lines(scaling_bars.bars(rows, ladder.spec.base.nproc),
                                                               full=glyphs.full, comm=glyphs.warmup))]
    for row, run in zip(rows, ladder.runs):
        if run.summary is not None and row.status == "ok":
            parts += [Text(""), Text(f"{row.rung} {row.name}: speed of light · {busy_text(run.summary)}", style="bold"),
                      sol_table(run.summary.speed_of_light, glyphs=glyphs)]
    return Unsqueezed(t, parts)

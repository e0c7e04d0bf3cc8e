"""A sweep or an attention grid as grids: for a sweep, one table per (mode, precision) with sizes as
rows and contexts as columns; for an attention grid, one per variant with d as rows and seq as
columns. `t` switches what the cells hold. Cells that did not run show their status as a word as well
as a colour (OOM, error, cancelled, not run), so monochrome and ASCII terminals show it too."""
from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.widgets import Static

from perfconsole.core.reports import attention as report_attention
from perfconsole.core.reports import sweep as report_sweep
from perfconsole.core.reports.sweep import GRID_STATUSES, GridCell, GridTable, grid_status
from perfconsole.tui.glyphs import UNICODE, Glyphs

STATUS_WORD = {"ok": "ok", "oom": "OOM", "error": "error", "cancelled": "cancelled", "not_run": "not run"}
STATUS_STYLE = {"ok": "green", "oom": "bold red", "error": "bold red", "cancelled": "magenta", "not_run": "dim"}
EMPTY = "open a sweep or an attention grid in Runs (5, o) and press Enter on it"


def metrics_of(grid: Any) -> dict[str, str]:
    return report_sweep.SWEEP_METRICS if grid.kind == "sweep" else report_attention.ATTENTION_METRICS


def cells_of(grid: Any) -> list[Any]:
    return grid.runs if grid.kind == "sweep" else grid.cells


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
    if grid.kind == "sweep":
        b = grid.spec.base
        return f"batch {b.batch}, {','.join(map(str, grid.spec.warmups))} warm-up + {b.steps} steps"
    sp = grid.spec
    return f"batch {sp.batch}, {sp.warmup} warm-up + {sp.iters} passes"


def counts_line(grid: Any) -> str:
    counts: dict[str, int] = {}
    for c in cells_of(grid):
        s = grid_status(c.status)
        counts[s] = counts.get(s, 0) + 1
    total = sum(counts.values())
    finished = total - counts.get("not_run", 0)
    return f"{finished}/{total} cells finished: " + ", ".join(
        f"{counts[s]} {STATUS_WORD[s]}" for s in GRID_STATUSES if counts.get(s))


class GridsPane(ScrollableContainer):
    """Scrolls both ways (arrows, PgUp/PgDn, Home/End) so wide grids stay readable at 80x24."""
    BINDINGS = [
        Binding("t", "next_metric", "Values", id="grids.metric"),
        Binding("e", "app.export_grid", "Export", id="grids.export"),
        Binding("s", "app.save_grid", "Save", id="grids.save"),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.grid: Any = None
        self.metric = ""

    def compose(self) -> ComposeResult:
        yield Static(EMPTY, id="grids-head", classes="title")
        yield Static("", id="grids-body")
        yield Static("", id="grids-findings")

    def show(self, grid: Any) -> None:
        if grid is not self.grid:
            self.metric = next(iter(metrics_of(grid))) if grid is not None else ""
        self.grid = grid
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
            return
        env = g.environment
        device = env.get("gpu_name") or env.get("cpu") or "?"
        metrics = metrics_of(g)
        others = ", ".join(v for k, v in metrics.items() if k != self.metric)
        text = Text()
        text.append(g.name, style="bold")
        text.append(f"\n{device} · torch {env.get('torch', '?')} · {setup_line(g)} · {g.status} · {counts_line(g)}\n")
        text.append("cells: ")
        text.append(metrics[self.metric], style="bold")
        text.append(f"   (t: {others})")
        head.update(text)
        tables = tables_of(g, self.metric)
        # One width for every value column of every table, so the tables line up for comparing.
        width = max((cell_text(c, self.metric).cell_len for t in tables for row in t.cells for c in row), default=0)
        parts: list[Any] = []
        for i, table in enumerate(tables):
            if i:
                parts.append(Text(""))
            parts.append(render_grid(table, self.metric, width))
        body.update(Group(*parts))
        lines = Text("Findings\n", style="bold")
        for f in findings_of(g):
            lines.append(f"- {f}\n", style="")
        notes.update(lines)

"""Every run of the session and every snapshot opened from disk, with marks for comparing; sweeps and
attention grids opened from disk are listed after the runs and open into the Grids pane."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from perfconsole.core.record import RunRecord
from perfconsole.core.reports.sweep import grid_status
from perfconsole.tui.format import shorten
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.console_table import ConsoleTable
from perfconsole.tui.screens.live import STATUS_STYLE


class RunsPane(Vertical):
    BINDINGS = [
        # At 80 columns the footer holds seven keys beside the app's ? and q; Enter (view) and i (import)
        # are in the help (?) and the command palette.
        Binding("space,m", "app.toggle_mark", "Mark", id="runs.mark", key_display="m"),
        Binding("enter", "app.view_run", "View", id="runs.view", show=False),  # a grid opens in Grids
        Binding("c", "app.compare", "Compare", id="runs.compare"),
        Binding("s", "app.save_run", "Save", id="runs.save"),
        Binding("o", "app.open_snapshot", "Open", id="runs.open"),
        Binding("i", "app.import_profile", "Import", id="runs.import", show=False),
        Binding("e", "app.export_run", "Export", id="runs.export"),
        Binding("d", "app.delete_run", "Delete", id="runs.delete"),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.ids: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="runs-title", classes="title")
        yield Static("", id="runs-queue", classes="queue")  # runs waiting their turn; hidden when none
        yield ConsoleTable(id="runs-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#runs-queue", Static).display = False
        t = self.query_one("#runs-table", DataTable)
        for col in ("", "#", "run", "status", "steps", "mean ms", "tokens/s", "source"):
            t.add_column(col, key=col or "mark")

    def show_runs(self, runs: list[RunRecord], marked: list[str], sources: dict[str, str],
                  grids: Sequence[Any] = ()) -> None:
        t = self.query_one("#runs-table", DataTable)
        row = t.cursor_row
        t.clear()
        self.ids = [r.id for r in runs] + [g.id for g in grids]
        for i, r in enumerate(runs):
            mark = self.glyphs.mark if r.id in marked else " "
            order = str(marked.index(r.id) + 1) if r.id in marked else ""
            sm = r.summary
            t.add_row(mark, order, r.name, Text(r.status, style=STATUS_STYLE.get(r.status, "")),
                      Text(f"{len(r.steps)}/{r.spec.steps}", justify="right"),
                      Text("-" if sm is None else f"{sm.total_ms.mean:,.3f}", justify="right"),
                      Text("-" if sm is None else f"{sm.tokens_per_s:,.0f}", justify="right"),
                      Path(sources[r.id]).name if r.id in sources else "session", key=r.id)
        for g in grids:
            cells = g.runs if g.kind in ("sweep", "ladder") else g.cells
            done = sum(grid_status(c.status) != "not_run" for c in cells)
            # Grid names list every axis value; shortened, the status and source stay in view at 80 columns.
            t.add_row(" ", "", shorten(g.name, 40), Text(g.status, style=STATUS_STYLE.get(g.status, "")),
                      Text(f"{done}/{len(cells)} cells", justify="right"), Text("-", justify="right"),
                      Text("-", justify="right"), Path(sources[g.id]).name if g.id in sources else "session",
                      key=g.id)
        if self.ids:
            t.move_cursor(row=min(row, len(self.ids) - 1))
        n = len(marked)
        self.query_one("#runs-title", Static).update(
            _count(len(runs), "run") + (f", {_count(len(grids), 'grid')} (Enter shows one)" if grids else "")
            + f", {n} marked" + (" (c compares them, first marked is the baseline)" if n >= 2 else
                                              " (space marks; mark two or more to compare)"))

    def show_queue(self, text: str) -> None:
        box = self.query_one("#runs-queue", Static)
        box.update(text)
        box.display = bool(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # The table's own Enter binding wins over ours, so its selection message does the viewing.
        event.stop()
        self.app.action_view_run()

    def current_id(self) -> str | None:
        t = self.query_one("#runs-table", DataTable)
        if not self.ids or t.cursor_row >= len(self.ids):
            return None
        return self.ids[t.cursor_row]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")

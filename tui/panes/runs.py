"""Every run of the session and every snapshot opened from disk, with marks for comparing; sweeps and
attention grids opened from disk are listed after the runs and open into the Grids pane, saved comparisons
after them, opening into Compare."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from perfconsole.core.record import RunRecord
from perfconsole.core.reports.names import cut, differs_first, short_title
from perfconsole.core.reports.sweep import grid_status
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.console_table import ConsoleTable, cut_middle
from perfconsole.tui.panes.live import STATUS_STYLE


HEADS = ("", "#", "run", "status", "steps", "mean ms", "tokens/s", "source")


class RunsPane(Vertical):
    BINDINGS = [
        # At 80 columns the footer holds seven keys beside the app's ? and q; Enter (view) and i (import)
        # are in the help (?) and the command palette.
        Binding("space,m", "app.toggle_mark", "Mark", id="runs.mark", key_display="m"),
        Binding("enter", "app.view_run", "View", id="runs.view", show=False),  # a grid opens in Grids
        Binding("c", "app.compare", "Compare", id="runs.compare"),
        Binding("s", "app.save_run", "Save", id="runs.save"),
        # The keys that open a dialog with a path field are priority bindings: the app opens the dialog
        # before it hands on the next key, so a path typed in a burst right after (tmux send-keys, typing
        # over SSH) goes to the dialog, not to the table behind it (the pane holds no text field).
        Binding("o", "app.open_snapshot", "Open", id="runs.open", priority=True),
        Binding("i", "app.import_profile", "Import", id="runs.import", show=False, priority=True),
        Binding("e", "app.export_run", "Export", id="runs.export", priority=True),
        Binding("d", "app.delete_run", "Delete", id="runs.delete"),
        Binding("t", "timeline", "Timeline", id="runs.timeline", show=False),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.ids: list[str] = []
        self._shown: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="runs-title", classes="title")
        yield Static("", id="runs-queue", classes="queue")  # runs waiting their turn; hidden when none
        yield ConsoleTable(id="runs-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#runs-queue", Static).display = False
        t = self.query_one("#runs-table", DataTable)
        for col in HEADS:
            t.add_column(col, key=col or "mark")

    def show_runs(self, runs: list[RunRecord], marked: list[str], sources: dict[str, str],
                  grids: Sequence[Any] = (), comparisons: Mapping[str, Any] | None = None) -> None:
        comparisons = dict(comparisons or {})
        self._shown = (runs, marked, sources, grids, comparisons)
        t = self.query_one("#runs-table", DataTable)
        row = t.cursor_row
        self.ids = [r.id for r in runs] + [g.id for g in grids] + list(comparisons)
        rows: list[list[Any]] = []
        for r in runs:
            mark = self.glyphs.mark if r.id in marked else " "
            order = str(marked.index(r.id) + 1) if r.id in marked else ""
            sm = r.summary
            rows.append([mark, order, r.name, Text(r.status, style=STATUS_STYLE.get(r.status, "")),
                         Text("-" if r.status == "imported" else f"{len(r.steps)}/{r.spec.steps}", justify="right"),
                         Text("-" if sm is None else f"{sm.total_ms.mean:,.3f}", justify="right"),
                         Text("-" if sm is None else f"{sm.tokens_per_s:,.0f}", justify="right"),
                         _source(sources.get(r.id))])
        for g in grids:
            cells = g.runs if g.kind in ("sweep", "ladder", "scale") else g.cells
            done = sum(grid_status(c.status) != "not_run" for c in cells)
            rows.append([" ", "", g.name, Text(g.status, style=STATUS_STYLE.get(g.status, "")),
                         Text(f"{done}/{len(cells)} cells", justify="right"), Text("-", justify="right"),
                         Text("-", justify="right"), _source(sources.get(g.id))])
        compared = []
        for cid, c in comparisons.items():  # "compare fp32 vs bf16 · tiny ...", its runs' count where steps go
            compared.append(f"compare {short_title(c.runs)}")
            rows.append([" ", "", compared[-1], Text("-"), Text(f"{len(c.runs)} runs", justify="right"),
                         Text("-", justify="right"), Text("-", justify="right"), _source(sources.get(cid))])
        widths = self._fit_widths(rows)
        name_w, source_w = widths[2], widths[7]
        # New columns of the widths computed here: a DataTable column stays as wide as its widest cell ever
        # was, and one that measures its cells itself can be drawn before it has (every name as "tin").
        t.clear(columns=True)
        for col, w in zip(HEADS, widths):
            t.add_column(col, key=col or "mark", width=w)
        # Where a run's name does not fit, every run's starts with the fields that differ among them, first what
        # tells it from the runs nearest it, and keeps its "#2" whole; a grid's name starts with its kind ("sweep",
        # "attention") and is cut in the middle.
        too_long = any(len(r.name) > name_w for r in runs)
        names = [cut(head, name_w) for head in differs_first(runs)] if too_long else [r.name for r in runs]
        names += [cut_middle(g.name, name_w) for g in grids] + [cut(name, name_w) for name in compared]
        for key, cells, name in zip(self.ids, rows, names):
            t.add_row(*cells[:2], name, *cells[3:7], cut_middle(cells[7], source_w), key=key)
        if self.ids:
            t.move_cursor(row=min(row, len(self.ids) - 1))
        n = len(marked)
        listed = [_count(n, noun) for n, noun in ((len(grids), "grid"), (len(comparisons), "comparison")) if n]
        self.query_one("#runs-title", Static).update(
            _count(len(runs), "run") + (f", {', '.join(listed)} (Enter shows one)" if listed else "")
            + f", {n} marked" + (" (c compares them, first marked is the baseline)" if n >= 2 else
                                              " (space marks; mark two or more to compare)"))

    def _fit_widths(self, rows: list[list[Any]]) -> list[int]:
        """Every column's width, the run's name and its source cut to keep every column in view: at 80
        columns a long name (grid names list every axis value) pushed the source out, leaving one letter."""
        width = (self.size.width or self.app.size.width) - 2            # the vertical scrollbar
        cols = [max([len(HEADS[i])] + [len(str(r[i])) for r in rows]) for i in range(len(HEADS))]
        room = width - 2 * len(HEADS) - sum(cols[:2]) - sum(cols[3:7])   # a cell's padding is 1 a side
        name, source = cols[2], cols[7]
        if name + source > room:
            # a file's start and its end (its date, its kind), in a third of the room: the names, which tell the
            # runs apart, take the rest
            source = min(source, max(12, room // 3))
            name = max(12, room - source)
        return [*cols[:2], name, *cols[3:7], source]

    def on_resize(self) -> None:
        if self._shown is not None:
            self.show_runs(*self._shown)

    def show_queue(self, text: str) -> None:
        box = self.query_one("#runs-queue", Static)
        box.update(text)
        box.display = bool(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # The table's own Enter binding wins over ours, so its selection message does the viewing.
        event.stop()
        self.app.action_view_run()

    def action_timeline(self) -> None:
        """The run under the cursor in the Timeline pane (its torch trace, read there)."""
        runs = {r.id for r in (self._shown[0] if self._shown else [])}
        if self.current_id() not in runs:
            self.app.notify("t shows a run's timeline: pick a run", severity="warning")
            return
        self.app.action_view_run()
        # after the Live tab's focus, which viewing a run moves once the screen is drawn (it would show Live again)
        self.app.call_after_refresh(self.app.action_show_tab, "timeline")

    def current_id(self) -> str | None:
        t = self.query_one("#runs-table", DataTable)
        if not self.ids or t.cursor_row >= len(self.ids):
            return None
        return self.ids[t.cursor_row]


def _source(path: str | None) -> str:
    return Path(path).name.removesuffix(".json") if path else "session"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")

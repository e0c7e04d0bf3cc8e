"""What the console does with runs: mark, view, compare, save, open, import, export, delete; and with
sweeps and attention grids: open, show as grids, save, export, delete.

A mixin of the app, so every action is an `action_*` the keys, the footer and the command palette
reach alike. Files go to the data directory unless the user types another path.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from textual import work

from perfconsole.core import store
from perfconsole.core.paths import data_dir, safe_name, shipped_snapshots_dir
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.reports import export
from perfconsole.core.reports.names import short_title
from perfconsole.core.settings import RunSpec

SNAPSHOTS = "snapshots"
EXPORTS = "exports"
GRID_KINDS = ("sweep", "attention", "ladder", "scale")
# What `i` imports: every input core.profiling.load reads (docs/import.md lists them), in lines that fit the
# dialog at 80 columns (its title does not wrap)
IMPORT_TITLE = ("Import a profile: nsys stats CSVs or a stats log, an .nsys-rep,\n"
                "an nvprof log, a torch.profiler trace (torch_trace.json), or\n"
                "Nsight Compute's CSV pages (--csv --page details|raw) or .ncu-rep")


def snapshot_choices() -> list[Path]:
    """Saved snapshots in the data directory first, then the shipped examples."""
    out: list[Path] = []
    for d in (data_dir() / SNAPSHOTS, shipped_snapshots_dir()):
        if d is not None and d.is_dir():
            out += sorted(d.glob("*.json"))
    return out


def comparison_file_name(comparison: Any) -> str:
    """A comparison's snapshot name, unique as a run's is (its name, then an id the name never cuts off):
    the id comes from its runs' ids in order, so saving it again rewrites its own file, never another's."""
    digest = hashlib.sha1(" ".join(r.id for r in comparison.runs).encode()).hexdigest()[:12]
    return f"{safe_name('compare-' + short_title(comparison.runs), 60)}-{digest}"


class SessionActions:
    """Mixed into the console's App: uses its session (tui/session.py), its panes and notify()."""

    # --- the run under the cursor ----------------------------------------------------------------
    def _cursor_id(self) -> str | None:
        """The id of the run, grid or comparison under the Runs cursor, where Runs shows."""
        return self.runs_pane.current_id() if self.tabs.active == "runs" else None

    def _cursor_run(self) -> RunRecord | None:
        if self.tabs.active == "runs":
            rid = self._cursor_id()
            return self.session.run(rid) if rid else None
        return self.session.current

    def _cursor_grid(self) -> Any | None:
        """The sweep or attention grid under the Runs cursor, if the cursor is on one."""
        return self.session.grid(self._cursor_id())

    def action_toggle_mark(self) -> None:
        if self.on_listed_comparison("mark"):
            return
        r = self._cursor_run()
        if r is None:
            if self._cursor_grid() is not None:
                self.notify("grids are not compared with runs; Enter shows it in Grids", severity="warning")
            return
        self.session.toggle_mark(r.id)
        self.refresh_runs()

    def action_view_run(self) -> None:
        if self.on_listed_comparison("view"):
            return
        g = self._cursor_grid()
        if g is not None:
            self.show_grid(g)
            return
        r = self._cursor_run()
        if r is not None:
            self.session.show(r)
            self.show_current()
            self.action_show_tab("live")

    def action_compare(self) -> None:
        from perfconsole.core.reports.compare import Comparison

        runs = self.session.marked_runs()
        if len(runs) < 2:
            self.notify("mark at least two runs to compare (space in Runs)", severity="warning")
            return
        self.show_comparison(Comparison(runs))

    def show_comparison(self, comparison: Any) -> None:
        self.session.compare(comparison)
        self.compare_pane.show(comparison)
        self.action_show_tab("compare")

    def show_grid(self, grid: Any, switch: bool = True) -> None:
        self.session.show_grid(grid)
        self.grids_pane.show(grid)
        if switch:
            self.action_show_tab("grids")

    # --- files -----------------------------------------------------------------------------------
    def _save(self, obj: Any, name: str) -> Path | None:
        path = data_dir() / SNAPSHOTS / f"{safe_name(name)}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            store.save(obj, path)
        except (OSError, store.SnapshotError) as exc:
            self.notify(f"save failed: {exc}", severity="error")
            return None
        self.notify(f"saved {path}")
        return path

    def action_save_run(self) -> None:
        if self.on_listed_comparison("save"):
            return
        g = self._cursor_grid()
        if g is not None:
            self._save_grid(g)
            return
        r = self._cursor_run()
        if r is None:
            self.notify("no run to save", severity="warning")
        elif not r.finished:
            self.notify("the run is still going; save it when it has finished", severity="warning")
        else:
            path = self._save(r, f"{r.name}-{r.id}")
            if path is not None and self.session.saved(r.id, str(path)):
                self.refresh_runs()

    def _save_grid(self, g: Any) -> None:
        path = self._save(g, f"{g.kind}-{g.id}")
        if path is not None and self.session.saved(g.id, str(path)):
            self.refresh_runs()

    def action_save_grid(self) -> None:
        if self.session.shown_grid is None:
            self.notify("no grid open: open a sweep or attention snapshot in Runs (o)", severity="warning")
        else:
            self._save_grid(self.session.shown_grid)

    def action_save_comparison(self) -> None:
        if self.session.compared is None:
            self.notify("nothing compared yet", severity="warning")
        else:
            self.save_comparison(self.session.compared)  # listed in Runs, as after a restart (tui/saved_items.py)

    def action_open_snapshot(self) -> None:
        from perfconsole.tui.screens.dialogs import OpenScreen

        def opened(path: Path | None) -> None:
            if path is not None:
                self.open_path(path)

        self.push_screen(OpenScreen("Open a snapshot", snapshot_choices()), opened)

    def open_path(self, path: Path, switch: bool = True) -> None:
        from perfconsole.core.reports.compare import Comparison

        try:
            obj = store.load(path, stdin=False)  # a snapshot, or an older `run --json` document
        except store.SnapshotError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        if isinstance(obj, RunRecord):
            self.session.add(obj, str(path))
            self.refresh_runs()
            if switch:
                self.action_show_tab("runs")
        elif isinstance(obj, Comparison):
            for r in obj.runs:
                self.session.add(r, str(path))
            self.list_comparison(obj, str(path))
            self.refresh_runs()
            self.show_comparison(obj)
        elif obj.kind == "gate":  # its two runs in Compare, the verdict above them (core.reports.gate)
            from perfconsole.core.reports.gate import comparison as gate_comparison

            c = gate_comparison(obj)
            for r in c.runs:
                self.session.add(r, str(path))
            self.refresh_runs()
            self.show_comparison(c)
        elif obj.kind in GRID_KINDS:
            g = self.session.add_grid(obj, str(path))
            self.refresh_runs()
            if switch or self.session.shown_grid is None:
                self.show_grid(g, switch=switch)
        else:
            self.notify(f"{path}: a {obj.kind} snapshot; open it with `perfconsole export`", severity="warning")

    def _delete_grid(self, g: Any) -> None:
        from perfconsole.tui.screens.dialogs import ConfirmScreen

        own = self.session.own_file(g.id)

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            self.session.remove_grid(g)
            if own:
                Path(own).unlink(missing_ok=True)
            if self.session.shown_grid is g:
                self.show_grid(None, switch=False)
            self.refresh_runs()

        self.push_screen(ConfirmScreen(f"Delete {g.name} from the list{' and its file ' + own if own else ''}? (y/n)"),
                         answer)

    def action_import_profile(self) -> None:
        from perfconsole.tui.screens.dialogs import OpenScreen

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.import_profile(path)

        self.push_screen(OpenScreen(IMPORT_TITLE, [], "a directory of profiler files, or one file"), chosen)

    @work(thread=True, exclusive=True, exit_on_error=False, group="import")
    def import_profile(self, path: Path) -> None:
        from perfconsole.core.profiling.errors import ProfileError
        from perfconsole.core.profiling.load import load_profile

        try:
            tables, warnings = load_profile(path)
        except ProfileError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", timeout=10)
            return
        record = RunRecord(RunSpec(), name=f"import {path.name}", status="imported",
                           profile=Profile("import", [str(path)], tables, warnings))
        self.call_from_thread(self._imported, record, str(path))

    def _imported(self, record: RunRecord, source: str) -> None:
        self.session.add(record, source)
        self.session.show(record)
        self.show_current()
        self.refresh_runs()
        self.action_show_tab("kernels")

    def _export(self, obj: Any, name: str) -> None:
        from perfconsole.tui.screens.dialogs import ExportScreen

        def write(choice: tuple[str, Path] | None) -> None:
            if choice is None:
                return
            fmt, path = choice  # checked by the dialog: its folder is there, and it is new or to be overwritten
            source = self.session.file_of(getattr(obj, "id", ""))
            args = (obj, fmt, path, Path(source) if source else None)
            # An SVG reads and draws the run's whole trace from disk: off the UI thread; the others are in memory.
            if fmt == "svg":
                self._write_export_off_thread(*args)
            else:
                self._write_export(*args, self.notify)

        self.push_screen(ExportScreen(name, data_dir() / EXPORTS / safe_name(name)), write)

    @staticmethod
    def _write_export(obj: Any, fmt: str, path: Path, source: Path | None, notify: Any) -> None:
        """`obj` as `fmt` into `path`, saying which happened. A run's trace is looked for beside the file it was
        opened from (`source`), as `perfconsole export` does."""
        try:
            store.write_atomic(path, export.export(obj, fmt, source))
        except (OSError, ValueError) as exc:
            notify(f"export failed: {exc}", severity="error")
            return
        notify(f"exported {path}")

    @work(thread=True, exit_on_error=False, group="export")
    def _write_export_off_thread(self, obj: Any, fmt: str, path: Path, source: Path | None) -> None:
        self._write_export(obj, fmt, path, source, lambda *a, **k: self.call_from_thread(self.notify, *a, **k))

    def action_export_run(self) -> None:
        if self.on_listed_comparison("export"):
            return
        g = self._cursor_grid()
        if g is not None:
            self._export(g, g.name)
            return
        r = self._cursor_run()
        if r is None:
            self.notify("no run to export", severity="warning")
        else:
            self._export(r, r.name)

    def action_export_grid(self) -> None:
        g = self.session.shown_grid
        if g is None:
            self.notify("no grid open: open a sweep or attention snapshot in Runs (o)", severity="warning")
        else:
            self._export(g, g.name)

    def action_export_comparison(self) -> None:
        c = self.session.compared
        if c is None:
            self.notify("nothing compared yet", severity="warning")
        else:
            self._export(c, f"compare {c.name}"[:70])

    def action_delete_run(self) -> None:
        from perfconsole.tui.screens.dialogs import ConfirmScreen

        if self.on_listed_comparison("delete"):
            return
        g = self._cursor_grid()
        if g is not None:
            self._delete_grid(g)
            return
        r = self._cursor_run()
        if r is None:
            return
        if r is self.active:
            self.notify("cancel the run (x) before deleting it", severity="warning")
            return
        own = self.session.own_file(r.id)
        question = f"Delete {r.name} from the list{' and its file ' + own if own else ''}? (y/n)"

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            shown = self.session.current is r
            self.session.remove(r)
            if own:
                Path(own).unlink(missing_ok=True)
            if shown:
                self.show_current()
            self.refresh_runs()

        self.push_screen(ConfirmScreen(question), answer)

"""What the console does with runs: mark, view, compare, save, open, import, export, delete.

A mixin of the app, so every action is an `action_*` the keys, the footer and the command palette
reach alike. Files go to the data directory unless the user types another path.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work

from perfconsole.core import export, store
from perfconsole.core.paths import data_dir, safe_name, shipped_snapshots_dir
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.spec import RunSpec

if TYPE_CHECKING:
    from perfconsole.tui.app import PerfConsole

SNAPSHOTS = "snapshots"
EXPORTS = "exports"


def snapshot_choices() -> list[Path]:
    """Saved snapshots in the data directory first, then the shipped examples."""
    out: list[Path] = []
    for d in (data_dir() / SNAPSHOTS, shipped_snapshots_dir()):
        if d is not None and d.is_dir():
            out += sorted(d.glob("*.json"))
    return out


class SessionActions:
    # --- the run under the cursor ----------------------------------------------------------------
    def _cursor_run(self: PerfConsole) -> RunRecord | None:
        from perfconsole.tui.screens.runs import RunsPane

        if self.main("#tabs").active == "runs":
            rid = self.main(RunsPane).current_id()
            return self._record(rid) if rid else None
        return self.current

    def action_toggle_mark(self: PerfConsole) -> None:
        r = self._cursor_run()
        if r is None:
            return
        if r.id in self.marked:
            self.marked.remove(r.id)
        else:
            self.marked.append(r.id)
        self.refresh_runs()

    def action_view_run(self: PerfConsole) -> None:
        r = self._cursor_run()
        if r is not None:
            self.current = r
            self.show_current()
            self.action_show_tab("live")

    def action_compare(self: PerfConsole) -> None:
        from perfconsole.core.compare import Comparison
        from perfconsole.tui.screens.compare import ComparePane

        runs = [r for rid in self.marked if (r := self._record(rid)) is not None]
        if len(runs) < 2:
            self.notify("mark at least two runs to compare (space in Runs)", severity="warning")
            return
        self.show_comparison(Comparison(runs))

    def show_comparison(self: PerfConsole, comparison: Any) -> None:
        from perfconsole.tui.screens.compare import ComparePane

        self.comparison = comparison
        self.main(ComparePane).show(comparison)
        self.action_show_tab("compare")

    # --- files -----------------------------------------------------------------------------------
    def _save(self: PerfConsole, obj: Any, name: str) -> Path | None:
        path = data_dir() / SNAPSHOTS / f"{safe_name(name)}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            store.save(obj, path)
        except (OSError, store.SnapshotError) as exc:
            self.notify(f"save failed: {exc}", severity="error")
            return None
        self.notify(f"saved {path}")
        return path

    def action_save_run(self: PerfConsole) -> None:
        r = self._cursor_run()
        if r is None:
            self.notify("no run to save", severity="warning")
        elif not r.finished:
            self.notify("the run is still going; save it when it has finished", severity="warning")
        else:
            path = self._save(r, f"{r.name}-{r.id}")
            if path is not None and r.id not in self.sources:
                self.sources[r.id] = str(path)
                self.refresh_runs()

    def action_save_comparison(self: PerfConsole) -> None:
        if self.comparison is None:
            self.notify("nothing compared yet", severity="warning")
        else:
            self._save(self.comparison, f"compare-{self.comparison.name}"[:70])

    def action_open_snapshot(self: PerfConsole) -> None:
        from perfconsole.tui.screens.dialogs import OpenScreen

        def opened(path: Path | None) -> None:
            if path is not None:
                self.open_path(path)

        self.push_screen(OpenScreen("Open a snapshot", snapshot_choices()), opened)

    def open_path(self: PerfConsole, path: Path, switch: bool = True) -> None:
        from perfconsole.core.compare import Comparison

        try:
            obj = store.load(path)
        except store.SnapshotError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        if isinstance(obj, RunRecord):
            self._add_loaded(obj, str(path))
            self.refresh_runs()
            if switch:
                self.action_show_tab("runs")
        elif isinstance(obj, Comparison):
            for r in obj.runs:
                self._add_loaded(r, str(path))
            self.refresh_runs()
            self.show_comparison(obj)
        else:
            self.notify(f"{path}: a {obj.kind} snapshot; open it with `perfconsole export`", severity="warning")

    def _add_loaded(self: PerfConsole, r: RunRecord, source: str) -> None:
        if self._record(r.id) is None:
            self.runs.append(r)
            self.sources[r.id] = source

    def action_import_profile(self: PerfConsole) -> None:
        from perfconsole.tui.screens.dialogs import OpenScreen

        def chosen(path: Path | None) -> None:
            if path is not None:
                self.import_profile(path)

        self.push_screen(OpenScreen("Import nsys stats CSVs, a stats log or an nvprof log", [],
                                    "a directory of nsys stats CSVs, or one file"), chosen)

    @work(thread=True, exclusive=True, exit_on_error=False, group="import")
    def import_profile(self: PerfConsole, path: Path) -> None:
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

    def _imported(self: PerfConsole, record: RunRecord, source: str) -> None:
        self._add_loaded(record, source)
        self.current = record
        self.show_current()
        self.refresh_runs()
        self.action_show_tab("kernels")

    def _export(self: PerfConsole, obj: Any, name: str) -> None:
        from perfconsole.tui.screens.dialogs import ExportScreen

        def write(choice: tuple[str, Path] | None) -> None:
            if choice is None:
                return
            fmt, path = choice
            try:
                text = export.export(obj, fmt)
                path.parent.mkdir(parents=True, exist_ok=True)
                store.write_atomic(path, text)
            except (OSError, ValueError) as exc:
                self.notify(f"export failed: {exc}", severity="error")
                return
            self.notify(f"exported {path}")

        self.push_screen(ExportScreen(name, data_dir() / EXPORTS / safe_name(name)), write)

    def action_export_run(self: PerfConsole) -> None:
        r = self._cursor_run()
        if r is None:
            self.notify("no run to export", severity="warning")
        else:
            self._export(r, r.name)

    def action_export_comparison(self: PerfConsole) -> None:
        if self.comparison is None:
            self.notify("nothing compared yet", severity="warning")
        else:
            self._export(self.comparison, f"compare {self.comparison.name}"[:70])

    def action_delete_run(self: PerfConsole) -> None:
        from perfconsole.tui.screens.dialogs import ConfirmScreen

        r = self._cursor_run()
        if r is None:
            return
        if r is self.active:
            self.notify("cancel the run (x) before deleting it", severity="warning")
            return
        source = self.sources.get(r.id, "")
        own = bool(source) and Path(source).resolve().is_relative_to(data_dir().resolve())
        question = f"Delete {r.name} from the list{' and its file ' + source if own else ''}? (y/n)"

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            self.runs.remove(r)
            if r.id in self.marked:
                self.marked.remove(r.id)
            if own:
                Path(source).unlink(missing_ok=True)
            if self.current is r:
                self.current = None
                self.show_current()
            self.refresh_runs()

        self.push_screen(ConfirmScreen(question), answer)

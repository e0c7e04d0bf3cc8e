"""What earlier sessions saved in the data directory, listed in Runs as a new console starts: runs, grids and
comparisons; and the comparisons listed there.

A saved comparison is one row of its own ("compare fp32 vs bf16 · ..."), not its runs: a run saved on its own is
listed already, and deleting a run listed from a comparison's file would delete the comparison. Enter shows it
in Compare, `s` saves it again (into its own file), `e` exports it, `d` takes it off the list and deletes its
file where that lies in the data directory.

A mixin of the app, as SessionActions is (tui/actions.py): uses its session (tui/session.py), panes, notify(),
and SessionActions' _save, _export and show_comparison.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import work

from perfconsole.core import store
from perfconsole.core.paths import data_dir
from perfconsole.core.record import RunRecord
from perfconsole.tui.actions import GRID_KINDS, SNAPSHOTS, comparison_file_name


class SavedItems:
    """Mixed into the console's App."""

    @work(thread=True, exclusive=True, exit_on_error=False, group="saved")
    def load_saved_snapshots(self) -> None:
        """List the runs, grids and comparisons saved in the data directory, newest first, as a new session starts.

        Read on a worker thread: a data directory of many snapshots (each run carries its steps and
        profile tables) must not hold up the first frame or the keys.
        """
        folder = data_dir() / SNAPSHOTS
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
        found: list[tuple[Any, str]] = []
        unreadable = 0
        for path in files:
            try:
                obj = store.load(path, stdin=False)
            except (store.SnapshotError, OSError):
                unreadable += 1
                continue
            if isinstance(obj, RunRecord) or getattr(obj, "kind", None) in (*GRID_KINDS, "comparison"):
                found.append((obj, str(path)))
        self.call_from_thread(self._saved_loaded, found, unreadable, folder)

    def _saved_loaded(self, found: list[tuple[Any, str]], unreadable: int, folder: Path) -> None:
        for obj, source in found:
            if isinstance(obj, RunRecord):
                self.session.add(obj, source)
            elif obj.kind == "comparison":
                self.list_comparison(obj, source)
            else:
                self.session.add_grid(obj, source)
        self.refresh_runs()
        if unreadable:
            self.notify(f"{unreadable} file(s) in {folder} are not snapshots this version reads", severity="warning")

    # --- comparisons -----------------------------------------------------------------------------
    def list_comparison(self, comparison: Any, source: str) -> str:
        """List a comparison saved in `source` in Runs (once: saving it again lists the one row); its id."""
        cid = comparison_file_name(comparison)
        self.session.list_comparison(cid, comparison, source)
        return cid

    def save_comparison(self, comparison: Any) -> None:
        path = self._save(comparison, comparison_file_name(comparison))
        if path is not None:
            self.list_comparison(comparison, str(path))
            self.refresh_runs()

    def on_listed_comparison(self, key: str) -> bool:
        """A Runs key (`mark`, `view`, `save`, `export`, `delete`) on the comparison under the cursor, where the
        cursor is on one: True when it was, and the key has been answered."""
        cid = self._cursor_id()
        comparison = self.session.comparison(cid)
        if comparison is None:
            return False
        if key == "mark":
            self.notify("a comparison is not marked: Enter shows it in Compare", severity="warning")
        elif key == "view":
            self.show_comparison(comparison)
        elif key == "save":
            self.save_comparison(comparison)
        elif key == "export":
            self._export(comparison, f"compare {comparison.name}"[:70])
        elif key == "delete":
            self._delete_comparison(cid, comparison)
        return True

    def _delete_comparison(self, cid: str, comparison: Any) -> None:
        from perfconsole.tui.screens.dialogs import ConfirmScreen

        own = self.session.own_file(cid)

        def answer(yes: bool | None) -> None:
            if not yes:
                return
            self.session.remove_comparison(cid)
            if own:
                Path(own).unlink(missing_ok=True)
            if self.session.compared is comparison:
                self.session.compare(None)
                self.compare_pane.show(None)
            self.refresh_runs()

        self.push_screen(ConfirmScreen(f"Delete the comparison from the list{' and its file ' + own if own else ''}? "
                                       "(y/n)"), answer)

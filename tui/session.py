"""The console's session: its runs, the grids and saved comparisons listed beside them, the file each came
from or went to, the marks, the run the Live, Kernels and NVTX panes show, the grid and comparison shown.

The app owns one Session and its drivers (run_driver.py, ladder_driver.py, actions.py, saved_items.py) read
and write through it; nothing else changes these fields (tests/tui/test_session_writes.py scans for it).
"A run has a file" is said in one place, `file_of`: opened from it, saved to it by hand, or saved on the way
out. No Textual here: the session is tested on its own.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from perfconsole.core.paths import data_dir
from perfconsole.core.record import RunRecord


class Session:
    def __init__(self) -> None:
        self._runs: list[RunRecord] = []
        self._grids: list[Any] = []                  # sweeps, attention grids, ladders and scaling curves
        self._comparisons: dict[str, Any] = {}       # saved comparisons listed in Runs, by id (tui/saved_items.py)
        self._files: dict[str, str] = {}             # run, grid or comparison id -> its file
        self._marked: list[str] = []                 # ids of the runs marked to compare, in marking order
        self._current: RunRecord | None = None
        self._shown_grid: Any | None = None
        self._compared: Any | None = None

    # --- reading: views the panes draw, never to be changed by their readers -----------------------
    @property
    def runs(self) -> Sequence[RunRecord]:
        return self._runs

    @property
    def grids(self) -> Sequence[Any]:
        return self._grids

    @property
    def comparisons(self) -> Mapping[str, Any]:
        return self._comparisons

    @property
    def files(self) -> Mapping[str, str]:
        return self._files

    @property
    def marked(self) -> Sequence[str]:
        return self._marked

    @property
    def current(self) -> RunRecord | None:
        """The run the Live, Kernels and NVTX panes show."""
        return self._current

    @property
    def shown_grid(self) -> Any | None:
        """The grid the Grids pane shows."""
        return self._shown_grid

    @property
    def compared(self) -> Any | None:
        """The comparison the Compare pane shows."""
        return self._compared

    def run(self, run_id: str) -> RunRecord | None:
        return next((r for r in self._runs if r.id == run_id), None)

    def grid(self, grid_id: str | None) -> Any | None:
        return next((g for g in self._grids if g.id == grid_id), None)

    def comparison(self, cid: str | None) -> Any | None:
        return self._comparisons.get(cid) if cid else None

    def marked_runs(self) -> list[RunRecord]:
        return [r for rid in self._marked if (r := self.run(rid)) is not None]

    # --- files -----------------------------------------------------------------------------------
    def file_of(self, item_id: str) -> str | None:
        """The file the run, grid or comparison came from or was saved to, or None (a run of this session)."""
        return self._files.get(item_id)

    def own_file(self, item_id: str) -> str:
        """The item's file if it lies in the data directory (deleting the item deletes it), else ""."""
        source = self._files.get(item_id, "")
        own = bool(source) and Path(source).resolve().is_relative_to(data_dir().resolve())
        return source if own else ""

    def saved(self, item_id: str, path: str) -> bool:
        """The item was written to `path`. An item that has a file keeps it (the one it was opened from, or first
        saved to): True when this is its first."""
        if item_id in self._files:
            return False
        self._files[item_id] = path
        return True

    def forget_file(self, item_id: str) -> None:
        """Its file is not the item's after all (a save on the way out that failed)."""
        self._files.pop(item_id, None)

    # --- runs ------------------------------------------------------------------------------------
    def add(self, run: RunRecord, file: str | None = None) -> bool:
        """List a run (from `file` where it was read from one) under a name no other listed run has. A run whose
        id is listed already is not listed twice: False."""
        if self.run(run.id) is not None:
            return False
        self._unique_name(run)
        self._runs.append(run)
        if file is not None:
            self._files[run.id] = file
        return True

    def _unique_name(self, run: RunRecord) -> None:
        """"tiny ctx32 b2 fp32 train #2": two runs of one spec are named alike, and Runs, Compare and the exports
        tell runs apart by name."""
        taken = {x.name for x in self._runs if x.id != run.id}
        if run.name not in taken:
            return
        n = 2
        while f"{run.name} #{n}" in taken:
            n += 1
        run.name = f"{run.name} #{n}"

    def remove(self, run: RunRecord) -> None:
        """Off the list, its mark and its file with it; the panes show no run if they showed this one."""
        self._runs.remove(run)
        if run.id in self._marked:
            self._marked.remove(run.id)
        self._files.pop(run.id, None)
        if self._current is run:
            self._current = None

    def show(self, run: RunRecord | None) -> None:
        """Make `run` the one the Live, Kernels and NVTX panes show."""
        self._current = run

    def toggle_mark(self, run_id: str) -> bool:
        """Mark the run, or unmark it: True when it is marked now."""
        if run_id in self._marked:
            self._marked.remove(run_id)
            return False
        self._marked.append(run_id)
        return True

    # --- grids and comparisons -------------------------------------------------------------------
    def add_grid(self, grid: Any, file: str | None = None) -> Any:
        """List a grid (from or saved to `file`); one with its id listed already stays: the one listed."""
        listed = self.grid(grid.id)
        if listed is not None:
            return listed
        self._grids.append(grid)
        if file is not None:
            self._files[grid.id] = file
        return grid

    def show_grid(self, grid: Any | None) -> None:
        self._shown_grid = grid

    def compare(self, comparison: Any | None) -> None:
        self._compared = comparison

    def remove_grid(self, grid: Any) -> None:
        self._grids.remove(grid)
        self._files.pop(grid.id, None)

    def list_comparison(self, cid: str, comparison: Any, file: str) -> None:
        """A comparison saved in (or opened from) `file`, listed once by its id; saved again, it names its new file."""
        self._comparisons[cid] = comparison
        self._files[cid] = file

    def remove_comparison(self, cid: str) -> None:
        self._comparisons.pop(cid, None)
        self._files.pop(cid, None)

"""Running the optimization ladder from the console: the launch form's size, context, batch and
precision, one process a rung (core.grids.ladder), on a worker thread.

The ladder holds the GPU as a run does: no run starts while it climbs (queued runs wait for it),
ctrl+k cancels it and keeps the finished rungs, and quitting ends it. The Grids pane shows it as it
fills, and it is saved to the data directory after every rung.

The worker thread runs its own copy of the ladder; every update sends copies of what changed to the UI
thread (GridUpdated), which puts them into the ladder the Grids pane draws."""
from __future__ import annotations

import copy
from typing import Any

from textual import work

from perfconsole.core.paths import data_dir, safe_name
from perfconsole.core.settings import SpecError
from perfconsole.tui.actions import SNAPSHOTS
from perfconsole.tui.messages import GridEnded, GridUpdated


class LadderDriver:
    """Mixed into the console's App: uses its launch, session (tui/session.py), notify() and the run queue."""

    def action_run_ladder(self) -> None:
        if self.launch is not None:
            self.notify("the GPU is busy: the ladder can start once the run in progress ends (ctrl+k cancels it)",
                        severity="warning")
            return
        from perfconsole.core.grids.ladder import LadderRecord, LadderRunner, LadderSpec

        spec = self.launch_pane.spec
        if spec is None:
            self.notify("the launch form is not valid: fix it first", severity="error")
            return
        try:
            ladder = LadderSpec(spec.with_(mode="train", profile="none", memory=False)).validate()
        except SpecError as exc:
            self.notify(f"ladder: {exc}", severity="error")
            return
        record = LadderRecord.new(ladder)
        path = data_dir() / SNAPSHOTS / f"{safe_name(record.name)}-{record.id}.json"
        out = data_dir() / "runs" / record.id
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.notify(f"ladder: cannot save to {path.parent}: {exc}", severity="error")
            return
        self.session.add_grid(record, str(path))
        # The worker's own copy (same id, same snapshot file); the session's changes on this thread only.
        self.launch = runner = LadderRunner(copy.deepcopy(record), out_dir=out, save_to=path,
                                            executor=getattr(self, "executor", None))
        self.refresh_bindings()
        self.refresh_runs()
        self.show_grid(record)
        each = (f"one job of {ladder.base.nproc} processes each, after its one-process program" if ladder.base.nproc > 1
                else "one process each")
        self.notify(f"{record.name}: {len(record.runs)} rungs, {each} (train steps); saved to {path}")
        self.drive_ladder(record.id, runner)

    @work(thread=True, exclusive=True, exit_on_error=False, group="ladder")
    def drive_ladder(self, grid_id: str, runner: Any) -> None:
        record = runner.record
        ended = False

        def changed(update: Any) -> None:  # on this thread, between events: the cell is not changing now
            self.post_message(GridUpdated(grid_id, update.index, copy.deepcopy(update.run), record.status,
                                          list(record.cell_seconds), update.jobs))
        try:
            runner.run(changed)
            ended = True
        finally:
            self.post_message(GridEnded(grid_id, record.status if ended else None,
                                        list(record.cell_seconds) if ended else None))

    def on_grid_updated(self, message: GridUpdated) -> None:
        grid = self.session.grid(message.grid_id)
        if grid is None:
            return
        grid.runs[message.index] = message.cell
        grid.status, grid.cell_seconds = message.status, message.cell_seconds
        if message.jobs is not None:
            self.grid_jobs[message.grid_id] = message.jobs
        if self.session.shown_grid is grid:
            self.show_grid(grid, switch=False)

    def on_grid_ended(self, message: GridEnded) -> None:
        self.launch = None
        self.refresh_bindings()
        self.refresh_runs()
        grid = self.session.grid(message.grid_id)
        if grid is not None:
            if message.status is not None:
                grid.status, grid.cell_seconds = message.status, message.cell_seconds
            if grid.status == "running":  # its thread stopped early (the error is notified): not still running
                grid.status = "cancelled"
            if self.session.shown_grid is grid:
                self.show_grid(grid, switch=False)
            self.notify(f"{grid.name}: {grid.status}", severity="information" if grid.status == "ok" else "warning")
        self._start_next()

"""Running a grid's cells (a sweep's runs, an attention grid's cells), one child process per cell.

Every cell has a process of its own, so an OOM or crash ends that cell alone and gives the GPU all
its memory back. Most of a child's start-up is importing torch (4-5 s on a cloud VM, measured in
docs/results/startup_h200.md), none of it on the GPU. So the runner starts the next `start_ahead`
cells' processes together, held (see `worker.hold`): they import side by side, say they are ready,
and wait on stdin using no CPU. Only then is the first let go, and the rest follow one at a time.
No import ever runs while a cell is measured, and the import cost is paid once per batch.

`cancel()` is safe from any thread or a signal: it stops the running cell, kills the held ones and
keeps every finished cell.

Given an `executor` (core.launch.slurm.SlurmExecutor) every pending cell is a Slurm job, all of them
submitted at once (up to MAX_JOBS_IN_FLIGHT) and streamed back as they run; Slurm places them, so
nothing is started ahead or pinned to a GPU here, and a cancel scancels every job.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.launch.launcher import Launch

MAX_START_AHEAD = 8
MAX_JOBS_IN_FLIGHT = 256   # jobs submitted and not yet ended, one watching thread each


def default_start_ahead() -> int:
    """Half the CPU cores, 1 to 8: the imports run side by side, one core each."""
    return max(1, min(MAX_START_AHEAD, (os.cpu_count() or 2) // 2))


def estimate_seconds(done: list[tuple[float, float, bool]], remaining: list[float]) -> float | None:
    """Seconds the `remaining` cells (given by work) will take, from `done` (work, seconds, ran_steps).

    The fixed cost is the fastest done cell (start-up dominates it); the rate is fitted on the time
    the cells that ran their steps spent beyond that. None until one cell is done.
    """
    if not done:
        return None
    fixed = min(s for _, s, _ in done)
    worked = [(w, s - fixed) for w, s, ran in done if ran]
    total_work = sum(w for w, _ in worked)
    rate = sum(max(extra, 0.0) for _, extra in worked) / total_work if total_work > 0 else 0.0
    return sum(fixed + rate * w for w in remaining)


@dataclass(frozen=True)
class SweepUpdate:
    """What a progress display needs after every event of every cell."""
    index: int                   # the cell being run (or just finished)
    total: int
    run: Any                     # the cell: a RunRecord or an AttentionResult
    done: int                    # cells finished (any status)
    eta_s: float | None
    cell_finished: bool
    jobs: dict[str, int] | None = None   # under Slurm: jobs pending, running and done


class CellRunner:
    """Runs a record's pending cells in order. Subclasses say what a cell is through four methods."""

    def __init__(self, record: Any, save_to: os.PathLike[str] | None = None, start_ahead: int | None = None,
                 gpus: list[str] | None = None, executor: Any = None) -> None:
        """`gpus`: GPU indices to spread cells over, one cell per GPU at a time (core.grids.gpu_pool);
        None or one GPU runs the cells one after the other (pinned to that GPU, if one is named).
        `executor`: run each cell as a job of it (Slurm), all at once; `gpus` is then Slurm's business."""
        self.record = record
        self.executor = executor
        self.gpus = list(gpus) if gpus and executor is None else []
        self._gpu_of: dict[int, str] = {}
        self._running: dict[int, Any] = {}
        self._lock = threading.RLock()  # an update callback may cancel from inside a cell's update
        self.save_to = save_to
        self.start_ahead = default_start_ahead() if start_ahead is None else start_ahead
        if self.start_ahead < 1:
            raise ValueError(f"start_ahead must be at least 1, not {self.start_ahead}")
        self._cancel = threading.Event()
        self._launch: Launch | None = None
        self._held: dict[int, Launch] = {}

    # --- what a cell is ------------------------------------------------------------------------
    def cells(self) -> list[Any]:
        raise NotImplementedError

    def new_launch(self, index: int, cell: Any) -> Launch:
        raise NotImplementedError

    def work(self, cell: Any) -> float:
        """A cell's relative cost, for the time-left estimate."""
        raise NotImplementedError

    def measured(self, cell: Any) -> bool:
        """Whether a finished cell measured anything (an OOM at start-up did not)."""
        raise NotImplementedError

    def launch_env(self, index: int, env: dict[str, str] | None) -> dict[str, str] | None:
        """The env a subclass's new_launch gives cell `index`: its own, plus the cell's GPU, if any."""
        gpu = self._gpu_of.get(index) or (self.gpus[0] if len(self.gpus) == 1 else None)
        if gpu is None:
            return env
        from perfconsole.core.grids.gpu_pool import gpu_env

        return {**(env or {}), **gpu_env(gpu)}

    # --- running -------------------------------------------------------------------------------
    def cancel(self) -> None:
        self._cancel.set()
        launch = self._launch
        if launch is not None:
            launch.cancel()
        with self._lock:
            running = list(self._running.values())
        for launch in running:
            launch.cancel()
        for held in list(self._held.values()):
            held.kill()
        if self.executor is not None:
            self.executor.cancel_all()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def _start_batch(self, indices: list[int], cells: list[Any]) -> float:
        """Start these cells' processes held and wait until all are ready; returns the seconds it took."""
        started = time.monotonic()
        for j in indices:
            launch = self.new_launch(j, cells[j])
            self._held[j] = launch
            if self._cancel.is_set():
                break
            launch.start(hold=True)
        for launch in list(self._held.values()):
            launch.wait_ready()
        return time.monotonic() - started

    def run(self, on_update: Callable[[SweepUpdate], None] | None = None) -> Any:
        rec, cells = self.record, self.cells()
        rec.status = "running"
        total = len(cells)
        done = [(self.work(c), s, self.measured(c)) for c, s in zip(cells, rec.cell_seconds)
                if c.finished and s is not None]
        pending = [i for i, c in enumerate(cells) if not c.finished]
        startup_share: dict[int, float] = {}  # a batch's start-up, spread over its cells

        def update(i: int, finished: bool, eta: float | None) -> None:
            if on_update:
                jobs = self.executor.counts() if self.executor is not None else None
                on_update(SweepUpdate(i, total, cells[i], len(done), eta, finished, jobs))

        if self.executor is not None:  # every cell a job at once: "slots" are jobs in flight, not GPUs
            self.executor.expect(min(len(pending), MAX_JOBS_IN_FLIGHT))
            return self._run_on_gpus(pending, cells, done, update, [""] * min(len(pending), MAX_JOBS_IN_FLIGHT))
        if len(self.gpus) > 1:
            return self._run_on_gpus(pending, cells, done, update)
        try:
            for n, i in enumerate(pending):
                cell = cells[i]
                if self._cancel.is_set():
                    break
                if self.start_ahead > 1 and i not in self._held:
                    batch = pending[n:n + self.start_ahead]
                    cell.apply(ev.Progress("starting", f"{len(batch)} processes"))
                    update(i, False, estimate_seconds(done, [self.work(cells[j]) for j in pending[n:]]))
                    seconds = self._start_batch(batch, cells)
                    startup_share.update({j: seconds / len(batch) for j in batch})
                    if self._cancel.is_set():
                        break
                held = self._held.pop(i, None)
                launch = self._launch = held or self.new_launch(i, cell)
                if self._cancel.is_set():  # a cancel between the check above and the launch
                    break
                if held is None:
                    launch.start()
                if self._cancel.is_set():  # a cancel while it started, before launch.cancel could reach it
                    launch.cancel()
                started = time.monotonic() - startup_share.get(i, 0.0)
                remaining = [self.work(cells[j]) for j in pending[n:]]
                for event in launch.events():
                    cell.apply(event)
                    eta = estimate_seconds(done, remaining)
                    update(i, False, None if eta is None else max(eta - (time.monotonic() - started), 0.0))
                self._launch = None
                self._finish_cell(i, cell, time.monotonic() - started, done)
                update(i, True, estimate_seconds(done, [self.work(cells[j]) for j in pending[n + 1:]]))
        finally:
            for held in list(self._held.values()):
                held.discard()
            self._held.clear()
        return self._end(cells)

    def _end(self, cells: list[Any]) -> Any:
        rec = self.record
        rec.status = "cancelled" if self._cancel.is_set() or not all(c.finished for c in cells) else "ok"
        if self.save_to is not None:
            store.save(rec, self.save_to)
        return rec

    def _finish_cell(self, i: int, cell: Any, seconds: float, done: list) -> None:
        """A cell has ended: its time and GPU in the record, a cancel passed on, the grid saved."""
        self.record.cell_seconds[i] = seconds
        self._note_gpu(i)
        done.append((self.work(cell), seconds, self.measured(cell)))
        if cell.status == "cancelled":
            self._cancel.set()
        if self.save_to is not None:
            store.save(self.record, self.save_to)  # a kill between cells loses nothing finished

    def _note_gpu(self, index: int) -> None:
        """Record the GPU the cell ran on, where the record keeps them (`cell_gpus`)."""
        gpus = getattr(self.record, "cell_gpus", None)
        gpu = self._gpu_of.get(index) or (self.gpus[0] if len(self.gpus) == 1 else None)
        if gpus is not None and gpu is not None:
            gpus += [None] * (index + 1 - len(gpus))
            gpus[index] = gpu

    def _run_on_gpus(self, pending: list[int], cells: list[Any], done: list, update: Callable,
                     slots: list[str] | None = None) -> Any:
        """Several cells at once, one per GPU (core.grids.gpu_pool), or one per slot of `slots`; each
        keeps its place in the grid."""
        from perfconsole.core.grids.gpu_pool import run_on_gpus

        def run_cell(i: int, gpu: str) -> None:
            cell = cells[i]
            with self._lock:
                if self._cancel.is_set():
                    return  # cancelled while it waited for a GPU: it stays pending
                self._gpu_of[i] = gpu
                launch = self._running[i] = self.new_launch(i, cell)
                if self.executor is None:
                    launch.start()  # under the lock: cancel() sees it in _running with its process
            if self.executor is not None:
                launch.start()  # a job may wait here for the rest of its array: not under the lock
                if self._cancel.is_set():  # a cancel that came while it was submitted
                    launch.cancel()
            started = time.monotonic()
            try:
                for event in launch.events():
                    with self._lock:
                        cell.apply(event)
                        update(i, False, None)
            finally:
                with self._lock:
                    self._running.pop(i, None)
            with self._lock:
                self._finish_cell(i, cell, time.monotonic() - started, done)
                update(i, True, None)

        if slots == []:
            return self._end(cells)
        run_on_gpus(pending, self.gpus if slots is None else slots, run_cell, self._cancel)
        return self._end(cells)

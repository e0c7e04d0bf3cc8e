"""Typed messages from the background threads to the UI.

Threads never touch widgets. The run thread buffers events in a `RunFeed` and posts `RunUpdated`;
the NVML thread posts `GpuSampled`. Both coalesce (`can_replace`): when a burst queues several, the
UI handles only the newest, and the handler drains the whole buffer, so no step is lost and the UI
redraws at most once per batch.
"""
from __future__ import annotations

import threading
from typing import Any

from textual.message import Message

from perfconsole.core import events as ev
from perfconsole.core.telemetry.nvml import GpuSample


class RunFeed:
    """Events the run thread has read and the UI has not yet folded into the record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[ev.Event] = []

    def push(self, event: ev.Event) -> None:
        with self._lock:
            self._events.append(event)

    def drain(self) -> list[ev.Event]:
        with self._lock:
            out, self._events = self._events, []
        return out


class RunUpdated(Message):
    """New events for run `run_id` wait in its feed."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RunUpdated) and message.run_id == self.run_id


class RunEnded(Message):
    """The run thread is done: the feed holds the last events, `Finished` among them."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id


class GpuSampled(Message):
    """The newest NVML sample (None: no GPU), the history the sparklines draw, and the newest sample of
    every other visible GPU (a data-parallel job's, or a grid's spread over GPUs)."""

    def __init__(self, sample: GpuSample | None, history: tuple[GpuSample, ...],
                 others: tuple[GpuSample, ...] = ()) -> None:
        super().__init__()
        self.sample = sample
        self.history = history
        self.others = others

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuSampled)


class GridUpdated(Message):
    """A grid the console runs (a ladder) has new events. The worker thread owns the grid it runs; the
    message carries copies made there (the cell that changed, the grid's status and cell times), which
    the UI thread puts into the grid it draws, so no record is changed while it is drawn. A newer copy
    of the same cell replaces one not yet handled; another cell's is kept."""

    def __init__(self, grid_id: str, index: int, cell: Any, status: str, cell_seconds: list[float | None],
                 jobs: dict[str, int] | None = None) -> None:
        super().__init__()
        self.jobs = jobs   # under Slurm: the grid's jobs pending, running and done
        self.grid_id = grid_id
        self.index = index
        self.cell = cell
        self.status = status
        self.cell_seconds = cell_seconds

    def can_replace(self, message: Message) -> bool:
        return (isinstance(message, GridUpdated) and message.grid_id == self.grid_id
                and message.index == self.index)


class GridEnded(Message):
    """The grid's thread is done: every cell finished, or it was cancelled. `status` and `cell_seconds` are
    the worker's last word on the grid (None when the thread died before it could give one)."""

    def __init__(self, grid_id: str, status: str | None = None, cell_seconds: list[float | None] | None = None) -> None:
        super().__init__()
        self.grid_id = grid_id
        self.status = status
        self.cell_seconds = cell_seconds

"""Several specs compared with replicate processes, run in rounds: A1 B1 A2 B2 ... (`perfconsole compare`).

Run one after the other (all of A, then all of B), a drift in clocks or temperature over the minutes
lands on one side only and reads as a difference between them; interleaved, it hits both. Each spec's
record gets the same `ev.Replicate` markers as `--repeat` gives, so its processes, pooled steps and
between-process statistics are those of a repeated run. A process that fails (OOM, crash) ends that
spec's rounds, the others go on; a cancel ends them all and keeps every step measured.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

OnEvent = Callable[[int, ev.Event], None]


class InterleavedRuns:
    def __init__(self, specs: list[RunSpec], out_dir: Path | None = None, env: dict[str, str] | None = None,
                 executor: Any = None) -> None:
        self.specs = specs
        self.executor = executor  # core.launch.slurm.SlurmExecutor: each process a Slurm job
        self.out_dir = out_dir
        self.env = env
        self.records = [RunRecord(s) for s in specs]
        self.status = ["ok"] * len(specs)            # each spec's last process's ending
        self.order: list[tuple[int, int]] = []       # (spec, process) in the order they ran
        self.current: Launch | None = None
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        if self.current is not None:
            self.current.cancel()

    def run(self, on_event: OnEvent | None = None) -> list[RunRecord]:
        for r in range(max(s.repeat for s in self.specs)):
            self.run_round(r, [i for i, s in enumerate(self.specs) if r < s.repeat], on_event)
        return self.finish(on_event)

    def run_round(self, r: int, which: list[int], on_event: OnEvent | None = None) -> None:
        """Round `r`: one process of each spec in `which`, in order, skipping those that failed or were cancelled
        (`perfconsole gate` runs rounds until its verdict is decided: core.gate.rounds)."""
        for i in which:
            if not self._cancelled and self.status[i] == "ok":
                self._one(i, r, self.specs[i], on_event)

    def finish(self, on_event: OnEvent | None = None) -> list[RunRecord]:
        """End every record (one Finished each, after all rounds) and return them."""
        for i in range(len(self.records)):
            final = "cancelled" if self._cancelled and self.status[i] == "ok" else self.status[i]
            self._apply(i, ev.Finished(final), on_event)
        return self.records

    def launch(self, i: int, spec: RunSpec, out: Path | None) -> Launch:
        """The launch of one process of spec `i` (the gate starts it with another interpreter, or pairs two specs)."""
        return Launch(spec, out_dir=out, env=self.env, executor=self.executor)

    def _one(self, i: int, r: int, spec: RunSpec, on_event: OnEvent | None) -> None:
        out = self.out_dir / f"run-{i + 1}-process-{r + 1}" if self.out_dir is not None else None
        self.current = launch = self.launch(i, spec, out)
        self.order.append((i, r))
        self._apply(i, ev.Replicate(r, spec.repeat), on_event)
        launch.start()
        if self._cancelled:  # a cancel that came while it started
            launch.cancel()
        finished: ev.Finished | None = None
        for event in launch.events():
            if isinstance(event, ev.Finished):
                finished = event
            else:
                self._apply(i, event, on_event)
        self.status[i] = finished.status if finished else "error"
        # The record's last Finished comes after every round; this process's own ending is known now.
        self.records[i].replicates[-1].status = self.status[i]

    def _apply(self, i: int, event: ev.Event, on_event: OnEvent | None) -> None:
        self.records[i].apply(event)
        if on_event is not None:
            on_event(i, event)

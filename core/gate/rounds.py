"""The gate's processes: rounds of A's process then B's (interleaved, as `compare` runs them), or in paired mode
one process a round that runs both programs (core.measure.paired), each round's events folded into A's and B's
records as a repeated run's are, so each record's replicates are its processes."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perfconsole.core import events as ev
from perfconsole.core.gate.programs import Program
from perfconsole.core.launch.interleave import InterleavedRuns, OnEvent
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.settings import RunSpec


class ProgramLaunch(Launch):
    """A worker started with the program's interpreter (`--python`), this one's where it names none."""

    def __init__(self, spec: RunSpec, python: str | None, **kw) -> None:
        super().__init__(spec, **kw)
        self.python = python

    def command(self) -> list[str] | None:
        argv = super().command()
        if argv is not None and self.python and argv[0] == sys.executable:
            argv = [self.python, *argv[1:]]
        return argv


class PairedLaunch(ProgramLaunch):
    """One process that builds both programs and alternates their steps."""

    def __init__(self, specs: list[RunSpec], python: str | None, **kw) -> None:
        super().__init__(specs[0], python, **kw)
        self.specs = specs

    def command(self) -> list[str] | None:
        spec_args = [a for s in self.specs for a in ("--spec", json.dumps(s.to_dict()))]
        return [self.python or sys.executable, "-m", "perfconsole.core.measure.paired", *spec_args]


class GateRounds(InterleavedRuns):
    def __init__(self, programs: list[Program], paired: bool, env: dict[str, str] | None = None) -> None:
        super().__init__([p.spec for p in programs], env=env)
        self.programs = programs
        self.paired = paired

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def launch(self, i: int, spec: RunSpec, out: Path | None) -> Launch:
        if self.paired:
            return PairedLaunch(self.specs, self.programs[0].python, out_dir=out, env=self.env)
        return ProgramLaunch(spec, self.programs[i].python, out_dir=out, env=self.env)

    def round(self, r: int, on_event: OnEvent | None = None) -> None:
        if not self.paired:
            self.run_round(r, list(range(len(self.specs))), on_event)
            return
        self.run_round(r, [0], on_event)
        for i in range(1, len(self.specs)):  # the one process was every program's
            self.status[i] = self.status[0]
            self.records[i].replicates[-1].status = self.status[0]

    def _apply(self, i: int, event: ev.Event, on_event: OnEvent | None) -> None:
        if not self.paired or isinstance(event, ev.Finished):
            super()._apply(i, event, on_event)
        elif isinstance(event, ev.Paired):
            super()._apply(event.program, event.inner(), on_event)
        else:  # the process's own events (its start, progress, a failure) are both programs'
            for j, record in enumerate(self.records):
                record.apply(event)
                if on_event is not None and j == i:
                    on_event(i, event)

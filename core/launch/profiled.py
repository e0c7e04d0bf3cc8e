"""A profiled run whose headline is the program without the profiler.

`nsys profile` runs the whole process under its injection, so every CUDA call pays for it even outside the
capture range, and a headline taken from that process's quiet steps is not the program's. Under such a
profiler (`APART`) a run is two processes of the same spec, one after the other:

1. a plain process (`--repeat N`: N of them), whose steps, summary, memory and telemetry are the run's
   headline, streamed as they come;
2. the capture process under the profiler, whose tables and profile overhead are the run's profile. Its own
   quiet steps are kept in the overhead (`quiet_step_ms`, median `quiet_ms`) beside the plain median
   (`plain_ms`) and each plain process's median (`plain_process_ms`): what the profiler cost even outside the
   capture, as far as the spread between processes lets one process against another say (on an H100, plain
   processes of one eager, host-bound spec ranged 125.7-178.6 ms: docs/results/nsys_headline_h100.md). Its
   other events are progress lines.

`ProfiledLaunch` looks like one launch to its callers: one stream that ends with exactly one `Finished`.
A plain process that fails (an OOM, say) or is cancelled ends the run without a capture; a capture that
fails keeps the headline and ends with its status. Where nsys is named but broken, nothing runs (the
capture launch refuses, naming it); where it is absent, the capture falls back to the torch profiler in
one process, as a plain `Launch` does, unless that profiler is in `APART` too.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.launch.sequence import LaunchSequence
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

# Profilers whose process differs from a plain one even outside the capture. The torch profiler starts only
# for its profiled steps, inside the process, so its quiet steps are the plain program's: on an H100 its three
# processes' quiet medians (130.8-189.3 ms) lay among plain processes of the same spec (125.7-178.6 ms), whose
# spread is the whole story (docs/results/nsys_headline_h100.md).
APART = ("nsys",)
# The capture process's events that are the run's: the rest (steps, summary, memory...) are the plain process's.
_PASSED = (ev.Progress, ev.ProfileOverhead, ev.ProfileReady, ev.Overlap, ev.Error)


def plain_spec(spec: RunSpec) -> RunSpec:
    """The same program without the profiler."""
    return spec.with_(profile="none")


def plain_dir(out_dir: Path | None) -> Path | None:
    """Where the plain process's files go (memory captures, torchrun logs): beside the capture's."""
    return out_dir / "plain" if out_dir is not None else None


class ProfiledLaunch(LaunchSequence):
    """`plain` is the launch of `plain_spec(spec)` (one process, or RepeatedLaunch's N): core.launch.replicates'
    make_launch builds both."""

    def __init__(self, spec: RunSpec, plain: Any, out_dir: Path | None = None, nsys: str | None = None,
                 env: dict[str, str] | None = None, executor: Any = None) -> None:
        self.spec = spec
        self.nsys = nsys
        self.plain = plain
        self.capture = Launch(spec, out_dir=out_dir, nsys=nsys, env=env, executor=executor)
        self.current: Any = self.plain
        self._apart: bool | None = None
        self._cancelled = False

    def apart(self) -> bool:
        """Whether the capture needs a plain process beside it: the profiler it will run under is in APART."""
        if self._apart is None:
            profiler = self.spec.profile
            if profiler == "nsys":
                from perfconsole.core.launch.nsys import NsysError, find_nsys

                try:
                    profiler = "nsys" if find_nsys(self.nsys) is not None else "torch"
                except NsysError:  # the capture launch refuses it, naming it; nothing is run before
                    profiler = "refused"
            self._apart = profiler in APART
            if not self._apart:
                self.current = self.capture
        return self._apart

    def start(self, hold: bool = False) -> None:
        self.apart()  # which process comes first
        self.current.start(hold=hold)

    def wait_ready(self) -> None:
        self.current.wait_ready()

    def events(self) -> Iterator[ev.Event]:
        if not self.apart():
            yield from self.capture.events()
            return
        yield ev.Progress("plain", f"the spec without {self.spec.profile}: the run's headline")
        plain = RunRecord(self.plain.spec)
        finished = ev.Finished("error")
        for event in self.plain.events():
            if isinstance(event, ev.Finished):
                finished = event
                continue
            plain.apply(event)
            yield event
        plain.apply(finished)
        if finished.status != "ok" or self._cancelled:
            yield ev.Finished(finished.status if finished.status != "ok" else "cancelled")
            return
        self.current = self.capture
        if self._cancelled:  # a cancel between the two processes
            yield ev.Finished("cancelled")
            return
        yield from self._capture_events(plain)

    def _capture_events(self, plain: RunRecord) -> Iterator[ev.Event]:
        profiler = self.spec.profile
        quiet: list[float] = []
        steps = self.spec.steps
        status = "error"
        for event in self.capture.events():
            if isinstance(event, ev.Finished):
                status = event.status
            elif isinstance(event, ev.Step) and not event.warmup:
                quiet.append(event.total_ms)
                yield ev.Progress("profiling", f"under {profiler}, not capturing: step {len(quiet)}/{steps} "
                                               f"{event.total_ms:.1f} ms")
            elif isinstance(event, ev.Progress) and event.stage != "profiling":  # the headline's stages are done
                yield ev.Progress("profiling", f"{profiler} process, {event.stage}"
                                               + (f": {event.detail}" if event.detail else ""))
            elif isinstance(event, ev.ProfileOverhead):
                median = plain.summary.total_ms.median if plain.summary and plain.summary.total_ms else None
                yield dataclasses.replace(event, plain_ms=median, plain_steps=len(plain.steps),
                                          quiet_step_ms=list(quiet), plain_process_ms=_process_medians(plain))
            elif isinstance(event, _PASSED):
                yield event
        if self._cancelled and status == "ok":
            status = "cancelled"
        yield ev.Finished(status)


def _process_medians(plain: RunRecord) -> list[float]:
    """Each plain process's median step: one for a single process, one a replicate for --repeat."""
    summaries = [r.summary for r in plain.replicates if r.summary is not None] or [plain.summary]
    return [s.total_ms.median for s in summaries if s is not None and s.total_ms is not None]

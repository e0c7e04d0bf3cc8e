"""The profile pass: after the quiet measured steps, the same number of steps again under the run's profiler
(torch.profiler in this process; nsys or ncu from outside, between cudaProfilerStart and Stop), and what it cost.

`profiled_steps` emits `ProfileOverhead` (the profiled steps against the quiet ones) and, for the torch profiler,
`ProfileReady` with the tables and the pass's own seconds: `steps` (the profiled steps), `trace` (stopping the
profiler and writing its Chrome trace), `tables` (reading the trace back once, and from it the kernel, NVTX and
range tables, the GPU's busy share and, on a rank of a job, the communication overlap). nsys's tables come from
its own process (core.launch.profiled), so its pass says nothing of them here.
"""
from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from perfconsole.core import events as ev
from perfconsole.core.measure import provenance
from perfconsole.core.measure.pipeline import StepPipeline, steps_text
from perfconsole.core.settings import RunSpec
from perfconsole.model import annotate

if TYPE_CHECKING:
    from perfconsole.core.measure.job import Job

Emit = Callable[[ev.Event], None]


def profiled_steps(spec: RunSpec, pipe: StepPipeline, quiet: list[ev.Step], emit: Emit, out_dir: Path | None,
                   index: int, job: Job | None = None) -> float | None:
    """The same number of steps again, under the profiler, queued as the quiet ones were; their cost
    against the quiet ones. Returns the GPU's busy share over the profiled steps, where the profile can say."""
    capture = _profiler(spec, out_dir)
    n = 1 if spec.profile == "ncu" else spec.steps  # ncu replays each kernel: one step (core.launch.ncu_launch)
    emit(ev.Progress("profiling", f"{steps_text(n)} under {spec.profile}"))
    done: list[ev.Step] = []
    began = time.monotonic()
    with capture.active():
        for i in range(n):
            done += pipe.step(index + i, warmup=False)
        done += pipe.drain()
        seen = provenance.read()
        capture.seconds["steps"] = time.monotonic() - began
    capture.seconds["trace"] = time.monotonic() - began - capture.seconds["steps"]
    annotate.set_range_factory(None, False)
    profiled = [s.total_ms for s in done]
    busy = capture.busy_share(sum(profiled)) if spec.device == "cuda" else None
    if quiet and profiled:
        quiet_ms = statistics.median(s.total_ms for s in quiet)
        profiled_ms = statistics.median(profiled)
        emit(ev.ProfileOverhead(spec.profile, quiet_ms, profiled_ms, profiled_ms / quiet_ms, len(quiet),
                                len(profiled), profiled, gpu_busy_share=busy, profiled_phase_ms=_phase_medians(done),
                                profiled_host_forward_ms=_host_forward_mean(done), provenance=seen.to_dict()))
    if job and isinstance(capture, _TorchCapture):
        job.overlap(capture.capture.files, emit, capture.capture.events())
    capture.finish(emit)
    return busy


def _phase_medians(steps: list[ev.Step]) -> dict[str, float]:
    """Median ms per step of each phase the steps timed."""
    out = {}
    for phase in ("forward", "backward", "optimizer"):
        values = [v for v in (getattr(s, f"{phase}_ms") for s in steps) if v is not None]
        if values:
            out[phase] = statistics.median(values)
    return out


def _host_forward_mean(steps: list[ev.Step]) -> float | None:
    values = [s.host_forward_ms for s in steps if s.host_forward_ms is not None]
    return statistics.fmean(values) if values else None


class _NoCapture:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def active(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def finish(self, emit: Emit) -> None:
        pass

    def busy_share(self, span_ms: float) -> float | None:
        return None


class _NsysCapture(_NoCapture):
    """Under `nsys profile --capture-range=cudaProfilerApi`: NVTX ranges, capture only measured steps."""

    def __init__(self, spec: RunSpec) -> None:
        super().__init__()
        annotate.set_range_factory(torch.cuda.nvtx.range, not spec.compile)

    @contextlib.contextmanager
    def active(self):
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        try:
            yield
        finally:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()


class _TorchCapture(_NoCapture):
    def __init__(self, spec: RunSpec, out_dir: Path) -> None:
        from perfconsole.core.profiling.torch_profiler import TorchCapture, range_factory

        super().__init__()
        annotate.set_range_factory(range_factory(), not spec.compile)
        self.capture = TorchCapture(out_dir, spec.device)
        self._read_from: float | None = None

    def active(self) -> contextlib.AbstractContextManager:
        return self.capture

    def busy_share(self, span_ms: float) -> float | None:
        from perfconsole.core.profiling.torch_trace import gpu_busy_ms_of_events

        self._read_from = time.monotonic()
        events = self.capture.events()
        busy = gpu_busy_ms_of_events(events) if events else None
        return None if busy is None or span_ms <= 0 else min(1.0, busy / span_ms)

    def finish(self, emit: Emit) -> None:
        emit(ev.Progress("profiling", "building tables from the torch profiler"))
        began = self._read_from if self._read_from is not None else time.monotonic()
        tables = self.capture.tables()
        self.seconds["tables"] = time.monotonic() - began
        emit(ev.ProfileReady("torch", [str(f) for f in self.capture.files], tables, dict(self.seconds)))


def _profiler(spec: RunSpec, out_dir: Path | None) -> _NoCapture:
    if spec.profile in ("nsys", "ncu"):  # both profile what runs between cudaProfilerStart and Stop
        return _NsysCapture(spec)
    if spec.profile == "torch":
        return _TorchCapture(spec, out_dir or Path.cwd())
    return _NoCapture()


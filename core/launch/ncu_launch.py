"""`--profile ncu`: the run's time, then why its kernels take it.

A run under ncu is two processes of the same spec, one after the other:

1. the spec under the torch profiler (`--repeat N`: N processes): its quiet steps are the run's headline (the
   torch profiler starts only after them, inside the process: core.launch.profiled), and its profiled steps
   give each kernel's time, from which the kernels that matter are taken (the TOP_KERNELS with the most time);
2. the spec under `ncu` (core.launch.ncu), whose worker runs its warm-up and quiet steps and then one more step
   inside cudaProfilerStart/Stop, where ncu profiles each launch configuration of those kernels once. Its steps
   are not the run's: ncu's injection slows a process even outside what it profiles, and it replays each
   kernel it profiles many times (caches flushed between passes), so the profiled step's time and ncu's kernel
   durations are not the timed step's. Its quiet median is kept beside the headline's in the `ncu_run` row.

The ncu tables join the first process's profile, by kernel name (core.record: `ncu_kernels`, a row per
launch profiled; `ncu_rules`, every rule ncu applied; `ncu_run`, what was asked and what came back).
Without ncu nothing runs: the run ends `unsupported`, naming what to install. Where ncu runs but cannot
profile (counters refused, no kernel matched), the headline and the kernels' times are kept and the run ends
`error` with ncu's reason in one line.
"""
from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch import ncu as tool
from perfconsole.core.launch.launcher import Launch, worker_argv
from perfconsole.core.launch.processes import run_to_end
from perfconsole.core.launch.sequence import LaunchSequence
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

TOP_KERNELS = 8
KERNELS = "cuda_gpu_kern_sum"
# The ncu process's events that are the run's; its steps, summary, memory and telemetry are not.
_PASSED = (ev.Progress, ev.Error, ev.ProfileReady)
REPLAY_NOTE = ("ncu replays each kernel it profiles, its caches flushed between passes, in a process it slows "
               "outside them too: its durations and its step are not the timed steps'; the headline is the quiet "
               "steps of the process before it")


def timed_spec(spec: RunSpec) -> RunSpec:
    """The same program under the torch profiler: the headline, and each kernel's time."""
    return spec.with_(profile="torch")


def top_kernels(record: RunRecord, n: int = TOP_KERNELS) -> list[str]:
    rows = (record.profile.tables.get(KERNELS) if record.profile else None) or []
    ranked = sorted(rows, key=lambda r: -(r.get("total_time_ns") or 0))
    return [r["name"] for r in ranked[:n] if r.get("name")]


class NcuCapture(Launch):
    """The worker under ncu, and ncu's report read back as tables once it has ended."""

    def __init__(self, spec: RunSpec, ncu: str, kernels: list[str], out_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(spec, out_dir=out_dir, env=env)
        self.ncu = ncu
        self.kernels = kernels
        self.quiet: list[float] = []
        self.metrics: list[str] = []
        self._status = "ok"  # the tables' own: an ncu that profiled nothing ends the run in error

    def command(self) -> list[str] | None:
        out = self._need_out_dir()
        self.metrics = tool.metrics_to_ask(tool.device_metric_names(self.ncu, run_to_end))
        self._pending.append(ev.Progress("profiling", f"under ncu: {len(self.kernels)} kernels, each launch "
                                                      "configuration once, in one step after the quiet ones"))
        return tool.profile_command(self.ncu, self.kernels, self.metrics, out / "ncu", out / "ncu.log",
                                    worker_argv(self.spec, out))

    def events(self) -> Iterator[ev.Event]:
        status = "error"
        for event in super().events():
            if isinstance(event, ev.Finished):
                status = event.status
                continue
            if isinstance(event, ev.Step) and not event.warmup:
                self.quiet.append(event.total_ms)
            yield event
        if status == "ok":
            yield from self._tables()
            status = self._status
        yield ev.Finished(status)

    def _tables(self) -> Iterator[ev.Event]:
        from perfconsole.core.profiling.ncu_csv import read_pages
        from perfconsole.core.profiling.ncu_kernels import launch_rows, not_profiled, rule_rows

        assert self.out_dir is not None
        rep, log = self.out_dir / "ncu.ncu-rep", self.out_dir / "ncu.log"
        log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        why = tool.diagnose(log_text, rep.exists(), self.kernels)
        if why is not None:
            self._status = "error"
            yield ev.Error("profiler", why, log_text[-4000:])
            return
        yield ev.Progress("profiling", "ncu --import: reading the report's details and raw pages")
        try:
            details, raw = tool.export_pages(self.ncu, rep, self.out_dir, run_to_end)
            pages = read_pages(details.read_text(encoding="utf-8"), raw.read_text(encoding="utf-8"), str(details))
        except (tool.NcuError, ValueError, OSError) as exc:
            self._status = "error"
            yield ev.Error("profiler", f"ncu's report could not be read: {exc}", log_text[-4000:])
            return
        rows = launch_rows(pages)
        run = {"ncu": tool.version(self.ncu, run_to_end), "kernels_asked": list(self.kernels),
               "kernels_not_profiled": not_profiled(list(self.kernels), rows), "launches_profiled": len(rows),
               "metrics": list(self.metrics), "sections": list(tool.SECTIONS),
               "quiet_ms": statistics.median(self.quiet) if self.quiet else None, "quiet_steps": len(self.quiet),
               "note": REPLAY_NOTE}
        files = [str(p) for p in (rep, details, raw, log)]
        yield ev.ProfileReady("ncu", files, {"ncu_kernels": rows, "ncu_rules": rule_rows(pages), "ncu_run": [run]})


class NcuLaunch(LaunchSequence):
    """Looks like one launch to its callers: one stream that ends with exactly one `Finished`. `timed` is the
    launch of `timed_spec(spec)` (one process, or RepeatedLaunch's N): core.launch.replicates' make_launch."""

    def __init__(self, spec: RunSpec, timed: Any, out_dir: Path | None = None, nsys: str | None = None,
                 env: dict[str, str] | None = None, executor: Any = None) -> None:
        self.spec = spec
        self.timed = timed
        self.out_dir = out_dir
        self.env = env
        self.ncu = tool.find_ncu({**os.environ, **(env or {})})
        self.current: Any = timed
        self._cancelled = False
        self._started = False
        self._executor = executor

    def _refusal(self) -> str | None:
        if self.ncu is None:
            return tool.missing_text()
        if self._executor is not None:
            return "--profile ncu runs on this machine's GPU; it does not go through an executor (Slurm)"
        return None

    def start(self, hold: bool = False) -> None:
        if self._refusal() is None:
            self.timed.start(hold=hold)
            self._started = True

    def wait_ready(self) -> None:
        if self._started:
            self.current.wait_ready()

    def events(self) -> Iterator[ev.Event]:
        refused = self._refusal()
        if refused is not None:
            yield ev.Error("unsupported", f"unsupported: {refused}")
            yield ev.Finished("unsupported")
            return
        yield ev.Progress("plain", "the spec under the torch profiler: the run's headline and its kernels' times")
        timed = RunRecord(self.timed.spec)
        finished = ev.Finished("error")
        for event in self.timed.events():
            if isinstance(event, ev.Finished):
                finished = event
                continue
            timed.apply(event)
            yield event
        if finished.status != "ok" or self._cancelled:
            yield ev.Finished(finished.status if finished.status != "ok" else "cancelled")
            return
        kernels = top_kernels(timed, TOP_KERNELS)
        if not kernels:
            yield ev.Error("profiler", "the torch profiler saw no kernels, so there is nothing for ncu to profile")
            yield ev.Finished("error")
            return
        capture = NcuCapture(self.spec, self.ncu, kernels, self.out_dir, self.env)  # type: ignore[arg-type]
        self.current = capture
        if self._cancelled:
            yield ev.Finished("cancelled")
            return
        status = "error"
        for event in capture.events():
            if isinstance(event, ev.Finished):
                status = event.status
            elif isinstance(event, ev.Progress) and event.stage not in ("profiling", "plain"):
                yield ev.Progress("profiling", f"ncu process, {event.stage}" + (f": {event.detail}" if event.detail
                                                                                   else ""))
            elif isinstance(event, _PASSED):
                yield event
        if self._cancelled and status == "ok":
            status = "cancelled"
        yield ev.Finished(status)

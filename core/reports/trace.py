"""A run as a Chrome trace-event document (`export --format trace`), for ui.perfetto.dev and
chrome://tracing.

The record holds how long each step and phase took, not when it started, so the steps track is a
layout: each process's steps end to end from 0 (warm-up first), each step's phases end to end inside
it. The document says so in `otherData` and in the track names, since Perfetto does not show
`otherData`. The GPU telemetry does carry times (seconds since its sampler started) and keeps them,
shifted so that the sampler's start sits at the first measured step (when it was started).
A profile's NVTX table is a summary (total time per range), so it gets its own process, laid end to
end and named as a summary; the profiler's own timeline file is named, not copied.

Times are computed in integer nanoseconds and written as microseconds: a phase then closes exactly
at or before its step's end, which Perfetto needs to nest X slices (it rounds ts * 1000 to ns).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.telemetry import LABELS
from perfconsole.core.telemetry.gpu_summary import FIELDS, NOT_THROTTLING

Event = dict[str, Any]

STEPS_TID = 1
NVTX_TID = 1
COUNTER_TID = 0          # counters belong to a process; the tid is only there because every event has one
PHASES = (("forward", "forward_ms"), ("backward", "backward_ms"), ("optimizer", "optimizer_ms"))
# Files that hold a profiler's own timeline: the torch profiler's Chrome trace and nsys's report.
TIMELINE_FILES = ("torch_trace.json", ".nsys-rep", ".qdrep")

STEP_LAYOUT = ("Steps carry durations, not start times: each process's steps are laid end to end from "
               "0 in record order (warm-up first), and each step's phases (forward, backward, optimizer) "
               "end to end from the step's start. Gaps between steps are not recorded, so step "
               "timestamps are positions in this layout, not clock readings.")
NVTX_NOTE = ("Summary, not a timeline: one slice per NVTX range holding the total time of all its "
             "instances, laid end to end in table order; nested ranges are counted in their own slice "
             "and in their parent's.")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _ns(ms: Any) -> int | None:
    """A duration in ms as whole ns; None where the record has none (or a value JSON cannot carry)."""
    return max(0, round(ms * 1e6)) if _finite(ms) else None


def _us(ns: int) -> float:
    return ns / 1000.0


class _Trace:
    """The event list, with pids handed out in the order the tracks should be listed."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._pids = 0

    def process(self, name: str) -> int:
        self._pids += 1
        pid = self._pids
        self.events.append(_meta(pid, 0, "process_name", {"name": name}))
        self.events.append(_meta(pid, 0, "process_sort_index", {"sort_index": pid}))
        return pid

    def thread(self, pid: int, tid: int, name: str, sort_index: int = 0) -> None:
        self.events.append(_meta(pid, tid, "thread_name", {"name": name}))
        self.events.append(_meta(pid, tid, "thread_sort_index", {"sort_index": sort_index}))

    def slice(self, pid: int, tid: int, name: str, cat: str, start_ns: int, dur_ns: int,
              args: dict[str, Any]) -> None:
        self.events.append({"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
                            "ts": _us(start_ns), "dur": _us(dur_ns), "args": args})

    def counter(self, pid: int, name: str, ts_us: float, value: float) -> None:
        # Perfetto names a counter track "<name> <arg key>"; chrome://tracing shows the key as the series.
        self.events.append({"name": name, "cat": "telemetry", "ph": "C", "pid": pid, "tid": COUNTER_TID,
                            "ts": ts_us, "args": {"value": value}})


def _meta(pid: int, tid: int, name: str, args: dict[str, Any]) -> Event:
    return {"name": name, "cat": "__metadata", "ph": "M", "pid": pid, "tid": tid, "ts": 0.0, "args": args}


# --- steps -------------------------------------------------------------------------------------------
def _steps(tr: _Trace, pid: int, warmup: Sequence[ev.Step], measured: Sequence[ev.Step]) -> int:
    """Each step as an X slice with its phases nested inside; returns where the last step ends (ns)."""
    t = 0
    for step, is_warmup in [*((s, True) for s in warmup), *((s, False) for s in measured)]:
        name = f"warm-up step {step.index}" if is_warmup else f"step {step.index}"
        total = _ns(step.total_ms) or 0
        args: dict[str, Any] = {"index": step.index, "warmup": is_warmup, "total_ms": step.total_ms}
        args.update({key: getattr(step, key) for _, key in PHASES if _finite(getattr(step, key))})
        args["start"] = "laid end to end; the record holds no start time"
        tr.slice(pid, STEPS_TID, name, "step", t, total, args)
        end, at, elapsed_ms = t + total, t, 0.0
        for phase, key in PHASES:
            ms = getattr(step, key)
            if _ns(ms) is None:
                continue  # the mode lacks this phase
            # Phase ends are rounded from the running sum, so phases that add up to the step's total
            # end exactly at its end instead of a few rounded nanoseconds past it.
            elapsed_ms += ms
            want = t + (_ns(elapsed_ms) or 0)
            # A phase may not outlast its step (Perfetto drops X slices that do not nest): where the
            # record's phases add up to more than its total, the slice is cut and args keep its time.
            stop = max(at, min(want, end))
            phase_args: dict[str, Any] = {"ms": ms, "step": name}
            if want - stop > 1:
                phase_args["clipped_to_step_end"] = True
            tr.slice(pid, STEPS_TID, phase, "phase", at, stop - at, phase_args)
            at = stop
        t = end
    return t


def _warmup_ns(steps: Iterable[ev.Step]) -> int:
    return sum(_ns(s.total_ms) or 0 for s in steps)


def _run_processes(tr: _Trace, record: RunRecord) -> tuple[int, str]:
    """The steps of the run, or one process per replicate; returns the telemetry offset (ns) and a note."""
    if not record.replicates:
        pid = tr.process(f"run: {record.name} ({record.status})")
        tr.thread(pid, STEPS_TID, "steps (laid end to end from 0; not clock times)")
        _steps(tr, pid, record.warmup_steps, record.steps)
        return _warmup_ns(record.warmup_steps), "the run"
    n = len(record.replicates)
    for rep in record.replicates:
        pid = tr.process(f"process {rep.index + 1} of {n}: {record.name} ({rep.status})")
        tr.thread(pid, STEPS_TID, "steps (laid end to end from 0; not clock times)")
        _steps(tr, pid, rep.warmup_steps, rep.steps)
    # Each process sends its own telemetry and the record keeps the last one received.
    last = record.replicates[-1]
    return _warmup_ns(last.warmup_steps), f"process {last.index + 1} of {n} (the last one)"


# --- telemetry ---------------------------------------------------------------------------------------
def _counter_name(key: str) -> str:
    unit = FIELDS.get(key)
    return f"{LABELS.get(key, key)} ({unit})" if unit else key


def _telemetry(tr: _Trace, telemetry: dict[str, Any], offset_ns: int) -> int:
    """One counter track per numeric series; returns how many counter values were written."""
    series = telemetry.get("series") or {}
    times = series.get("t_s") or []
    pid = tr.process(f"GPU {telemetry.get('index', 0)} telemetry (NVML, sampled by the parent process)")
    written = 0
    for key, values in series.items():
        if key == "t_s" or not isinstance(values, list):
            continue
        if key == "reasons":
            # 1 where a sample names a reason other than an idle GPU or pinned application clocks (the
            # rule the telemetry summary's throttled share uses); null (not reported) stays out.
            values = [float(any(x not in NOT_THROTTLING for x in r)) if isinstance(r, list) else None
                      for r in values]
            name = "throttled (1 = a clock-event reason other than idle)"
        else:
            name = _counter_name(key)
        last = -math.inf
        for t, v in zip(times, values):
            if not (_finite(t) and _finite(v)) or t < last:
                continue  # null values are skipped; the sampler's clock is monotonic, so t never falls
            last = t
            tr.counter(pid, name, _us(offset_ns) + t * 1e6, float(v))
            written += 1
    return written


# --- profile -----------------------------------------------------------------------------------------
def _nvtx_summary(tr: _Trace, rows: list[dict[str, Any]], profiler: str) -> None:
    pid = tr.process(f"NVTX ranges (summary from {profiler}; not a timeline)")
    tr.thread(pid, NVTX_TID, "NVTX ranges (summary: total time per range, laid end to end)")
    t = 0
    for row in rows:
        total = int(row["total_time_ns"]) if _finite(row.get("total_time_ns")) else 0
        args = {k: v for k, v in row.items() if _finite(v) or isinstance(v, str)}
        args["summary"] = NVTX_NOTE
        tr.slice(pid, NVTX_TID, str(row.get("range") or row.get("name") or "?"), "nvtx_summary",
                 t, max(0, total), args)
        t += max(0, total)


def _profile_note(record: RunRecord) -> dict[str, Any] | None:
    p = record.profile
    if p is None:
        return None
    note: dict[str, Any] = {"profiler": p.profiler, "files": list(p.files),
                            "timeline_files": [f for f in p.files if f.endswith(TIMELINE_FILES)],
                            "note": "paths on the machine that ran the profile; the timeline is not copied here"}
    if p.tables.get("nvtx_sum"):
        note["nvtx_summary"] = NVTX_NOTE
    if record.replicates:
        note["process"] = "the record keeps the last process's profile"
    return note


# --- the document ------------------------------------------------------------------------------------
def document(record: RunRecord) -> dict[str, Any]:
    """The trace as a JSON-ready dict: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}."""
    tr = _Trace()
    offset_ns, owner = _run_processes(tr, record)
    other: dict[str, Any] = {
        "source": "perfconsole export --format trace", "run_id": record.id, "run_name": record.name,
        "status": record.status, "created": record.created,
        "spec": None if record.status == "imported" else record.spec.to_dict(),  # an import ran nothing
        "gpu": record.environment.get("gpu_name"), "time_unit": "ts and dur are microseconds",
        "step_layout": STEP_LAYOUT,
        "warmup_steps": len(record.warmup_steps), "measured_steps": len(record.steps),
    }
    if record.replicates:
        other["replicates"] = (f"{len(record.replicates)} processes, one pid each, each laid out from 0; "
                               "they ran one after another.")
    if record.telemetry:
        points = _telemetry(tr, record.telemetry, offset_ns)
        samples = len((record.telemetry.get("series") or {}).get("t_s") or [])
        other["telemetry"] = (
            f"{samples} NVML samples ({points} counter values) of {owner}, at their own times: t_s "
            "(seconds since the sampler started, when the child reported it was measuring) is placed at "
            f"the start of the first measured step, {_us(offset_ns):.3f} us in this layout. Steps have no "
            "clock times, so the two line up only approximately. Null values are left out.")
        flags = record.telemetry.get("flags")
        if flags:
            other["telemetry_flags"] = list(flags)
    if record.profile is not None and record.profile.tables.get("nvtx_sum"):
        _nvtx_summary(tr, record.profile.tables["nvtx_sum"], record.profile.profiler)
    profile = _profile_note(record)
    if profile is not None:
        other["profile"] = profile
    return {"traceEvents": tr.events, "displayTimeUnit": "ms", "otherData": other}


def trace_text(record: RunRecord) -> str:
    # allow_nan=False: a NaN would make a file that Perfetto and chrome://tracing refuse.
    return json.dumps(document(record), indent=1, allow_nan=False) + "\n"

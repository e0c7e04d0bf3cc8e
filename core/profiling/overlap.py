"""How much communication overlaps compute, from the kernel intervals of one rank's profile.

A kernel is communication when its category is `communication` (NCCL's kernels: core.profiling.
categories). Per GPU, the communication time is the union of the communication kernels' intervals;
the overlapped time is the part of that union during which at least one other kernel ran on the same
GPU (any stream). `overlap_share` = overlapped / communication: 1 means every collective ran under
compute, 0 means the GPU did nothing else while it communicated. Interval sources: a torch.profiler
Chrome trace (`kernel` events with `ts`/`dur` in microseconds and `args.device`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from perfconsole.core.profiling.categories import categorize

Interval = tuple[float, float]


@dataclass(frozen=True)
class Overlap:
    comm_kernel_ms: float | None     # union of communication kernel intervals, all GPUs of the trace
    overlapped_ms: float | None      # the part of it during which another kernel ran on that GPU
    overlap_share: float | None      # overlapped / comm; None without communication kernels
    comm_kernels: int
    other_kernels: int

    def to_dict(self) -> dict:
        return asdict(self)


def merge(intervals: list[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same points."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(intervals: list[Interval]) -> float:
    return sum(b - a for a, b in merge(intervals))


def intersection_length(xs: list[Interval], ys: list[Interval]) -> float:
    """Length of (union of xs) ∩ (union of ys), by a sweep over the two merged lists."""
    a, b = merge(xs), merge(ys)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlap(kernels: list[tuple[str, float, float, object]]) -> Overlap:
    """`kernels`: (name, start, end, device) with start/end in ms."""
    comm: dict[object, list[Interval]] = defaultdict(list)
    other: dict[object, list[Interval]] = defaultdict(list)
    for name, start, end, device in kernels:
        (comm if categorize(name) == "communication" else other)[device].append((start, end))
    n_comm = sum(len(v) for v in comm.values())
    n_other = sum(len(v) for v in other.values())
    if not n_comm:
        return Overlap(None if not n_other else 0.0, None, None, 0, n_other)
    comm_ms = sum(length(v) for v in comm.values())
    overlapped = sum(intersection_length(v, other.get(dev, [])) for dev, v in comm.items())
    return Overlap(comm_ms, overlapped, overlapped / comm_ms if comm_ms > 0 else None, n_comm, n_other)


def trace_overlap(path: str | Path) -> Overlap:
    """The overlap in a torch.profiler Chrome trace, plain or gzip-compressed (.json.gz) (its GPU kernels; a
    CPU-only trace has none)."""
    from perfconsole.core.profiling.torch_trace import trace_text

    doc = json.loads(trace_text(Path(path)))
    return events_overlap(doc.get("traceEvents", []) if isinstance(doc, dict) else [])


def events_overlap(events: list) -> Overlap:
    """The overlap of a trace's events (trace_overlap's, from events already parsed)."""
    kernels = []
    for e in events:
        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X":
            ts, dur = e.get("ts"), e.get("dur")
            if isinstance(ts, (int, float)) and isinstance(dur, (int, float)):
                device = (e.get("args") or {}).get("device", e.get("pid"))
                kernels.append((str(e.get("name", "")), ts / 1e3, (ts + dur) / 1e3, device))
    return overlap(kernels)

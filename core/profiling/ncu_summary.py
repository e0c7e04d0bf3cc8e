"""A kernel summary (`cuda_gpu_kern_sum`'s shape) from Nsight Compute's launches, for an import of ncu's pages
with no capture beside them: each kernel's total is the sum of its profiled launches' durations (ncu's
`gpu__time_duration.sum`, the details page's Duration), its count the launches ncu profiled.

Those durations are replay time: ncu ran each launch again, alone, caches flushed, once per section pass, so
they say how long the kernel took under ncu, not in a timed step, and the summary covers only the launches
ncu was asked to profile. `ncu_run`'s `kernel_times` says so (REPLAY), and every view of the times reads it
(`replay_times`). Where a capture's own kernel summary is there (nsys stats beside the pages), it is kept.

Pure Python, no pandas: a snapshot read back (core.record) makes the summary for an import saved without one.
"""
from __future__ import annotations

from typing import Any

from perfconsole.core.profiling.summary_rows import stats_row, with_time_pct

KERNELS = "cuda_gpu_kern_sum"
REPLAY = "ncu replay"
REPLAY_WORDS = "ncu replay time"  # how a table's title marks the times
REPLAY_NOTE = ("kernel times are Nsight Compute's replay durations (each profiled launch run again alone, caches "
               "flushed), not a timed step's")


def replay_times(tables: dict[str, Any]) -> bool:
    """Whether the tables' kernel times are ncu's replay durations (an import of ncu's pages alone)."""
    run = tables.get("ncu_run") or [{}]
    return bool(tables.get(KERNELS)) and run[0].get("kernel_times") == REPLAY


def with_replay_summary(tables: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The tables with a kernel summary from ncu's launch durations where they have ncu's launches and no kernel
    summary; a warning names the launches left out for want of a duration."""
    launches = tables.get("ncu_kernels") or []
    if not launches or tables.get(KERNELS):
        return tables, []
    by_name: dict[str, list[int]] = {}
    untimed = 0
    for launch in launches:
        seconds = launch.get("duration_s")
        if seconds is None or seconds != seconds or seconds < 0:  # None, NaN
            untimed += 1
            continue
        by_name.setdefault(str(launch.get("kernel") or ""), []).append(round(seconds * 1e9))
    warnings = []
    if untimed:
        warnings.append(f"{untimed} of the {len(launches)} launches in Nsight Compute's pages have no duration "
                        "(gpu__time_duration.sum, or the SpeedOfLight section's Duration): left out of the kernel times")
    if not by_name:
        return tables, warnings
    rows = with_time_pct([{**stats_row(ns, "instances"), "name": name} for name, ns in by_name.items()])
    run = dict((tables.get("ncu_run") or [{}])[0])
    run["kernel_times"] = REPLAY
    return {**tables, KERNELS: rows, "ncu_run": [run]}, warnings

"""A torch.profiler Chrome trace (`torch_trace.json`, what `--profile torch` writes) as perfconsole tables.

The same shapes the live capture builds (core.profiling.torch_profiler): cuda_gpu_kern_sum (GPU kernels
in a CUDA trace; CPU ops by self time in a CPU-only one), nvtx_sum from the record_function ranges
(`user_annotation` events), and nvtx_kern_sum with each kernel or op under every enclosing range.
A GPU kernel belongs to the ranges open on the thread that launched it: its launch is the runtime
event with the same `correlation` id. A trace is plain JSON; nothing here runs or unpickles anything.
"""
from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from perfconsole.core.profiling.columns import Row, Tables
from perfconsole.core.profiling.summary_rows import stats_row, with_time_pct
from perfconsole.core.profiling.table import table_from_rows

RANGE_CATS = ("user_annotation",)
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def trace_text(path: Path) -> str:
    """A trace file's text, plain or gzip-compressed (.gz); OSError and EOFError as the file gives them."""
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8", errors="replace")


def looks_like_torch_trace(text: str) -> bool:
    """From the first few KiB: a JSON object that opens with Kineto's schemaVersion or traceEvents
    (a perfconsole snapshot opens with "schema" and "kind")."""
    head = text.lstrip()[:4096]
    return head.startswith("{") and ('"traceEvents"' in head or '"schemaVersion"' in head)


def parse_torch_trace(text: str, source: str) -> tuple[Tables, list[str]]:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return {}, [f"{source}: not a torch trace ({type(exc).__name__})"]
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return {}, [f"{source}: not a torch trace (no traceEvents list)"]
    return tables_of_events(events, source)


def tables_of_events(events: list[Any], source: str) -> tuple[Tables, list[str]]:
    """The kernel, NVTX and range-kernel tables of a trace's events (a torch trace's, or an nsys SQLite export's as
    core.profiling.nsys_sqlite reads them)."""
    # One pass over the events (a long eager trace holds hundreds of thousands): complete events by what they are.
    ranges: list[dict] = []
    kernels: list[dict] = []
    launches: list[dict] = []
    host: list[dict] = []   # CPU ops and ranges, in the trace's order
    skipped = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)):
            skipped += 1
            continue
        cat = e.get("cat")
        if cat == "kernel":
            kernels.append(e)
        elif cat in LAUNCH_CATS:
            launches.append(e)
        elif cat == "cpu_op":
            host.append(e)
        elif cat in RANGE_CATS:
            ranges.append(e)
            host.append(e)
    warnings = [f"{source}: {skipped} complete event(s) without a numeric ts/dur skipped"] if skipped else []
    leaves = _kernels_at_launch(kernels, launches) if kernels else _cpu_ops_by_self_time(host)
    if not leaves and not ranges:
        return {}, warnings + [f"{source}: a trace with no kernels, CPU ops or ranges"]
    by_name: dict[str, list[int]] = defaultdict(list)
    for name, ns, _ in leaves:
        by_name[name].append(ns)
    tables: Tables = {"cuda_gpu_kern_sum": with_time_pct([{**stats_row(v, "instances"), "name": k}
                                                          for k, v in by_name.items()])}
    by_range: dict[str, list[int]] = defaultdict(list)
    for r in ranges:
        by_range[str(r.get("name", ""))].append(_ns(r["dur"]))
    if by_range:
        tables["nvtx_sum"] = with_time_pct([{**stats_row(v, "instances"), "style": "PushPop", "domain": "",
                                             "range": k} for k, v in by_range.items()])
        tables["nvtx_kern_sum"] = _range_kernels(ranges, leaves, by_range)
    return {k: table_from_rows(v) for k, v in tables.items()}, warnings


def _ns(us: float) -> int:
    return round(us * 1000)  # the trace's times are microseconds


Leaf = tuple[str, int, tuple[Any, Any, float]]  # name, ns, (pid, tid, host time that places it in ranges)


def _kernels_at_launch(kernels: list[dict], launches: list[dict]) -> list[Leaf]:
    by_corr = {e.get("args", {}).get("correlation"): e for e in launches}
    out = []
    for k in kernels:
        launch = by_corr.get(k.get("args", {}).get("correlation"))
        where = (launch["pid"], launch["tid"], launch["ts"]) if launch else (None, None, -1.0)
        out.append((str(k.get("name", "")), _ns(k["dur"]), where))
    return out


def _cpu_ops_by_self_time(spans: list[dict]) -> list[Leaf]:
    """CPU ops by self time: each op's duration less its direct children's, per thread (as the profiler)."""
    out = []
    for (pid, tid), evs in _by_thread(spans).items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list[Any]] = []   # [event, children's time]
        for e in evs:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                _close(stack.pop(), out, pid, tid)
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
        while stack:
            _close(stack.pop(), out, pid, tid)
    return out


def _close(entry: list[Any], out: list[Leaf], pid: Any, tid: Any) -> None:
    e, children = entry
    self_us = e["dur"] - children
    if e.get("cat") == "cpu_op" and self_us > 0:
        out.append((str(e.get("name", "")), _ns(self_us), (pid, tid, e["ts"])))


def _by_thread(spans: list[dict]) -> dict[tuple[Any, Any], list[dict]]:
    groups: dict[tuple[Any, Any], list[dict]] = defaultdict(list)
    for e in spans:
        groups[(e.get("pid"), e.get("tid"))].append(e)
    return groups


def _range_kernels(ranges: list[dict], leaves: list[Leaf], instances: dict[str, list[int]]) -> list[Row]:
    """Each leaf under every range open on its thread at its host time; a name counts once per leaf."""
    acc: dict[tuple[str, str], list[int]] = defaultdict(list)
    by_thread = _by_thread(ranges)
    leaves_by_thread: dict[tuple[Any, Any], list[Leaf]] = defaultdict(list)
    for leaf in leaves:
        leaves_by_thread[(leaf[2][0], leaf[2][1])].append(leaf)
    for key, rs in by_thread.items():
        rs = sorted(rs, key=lambda e: (e["ts"], -e["dur"]))
        points = sorted(leaves_by_thread.get(key, []), key=lambda leaf: leaf[2][2])
        open_: list[dict] = []
        i = 0
        for name, ns, (_, _, t) in points:
            while i < len(rs) and rs[i]["ts"] <= t:
                open_.append(rs[i])
                i += 1
            open_ = [r for r in open_ if t < r["ts"] + r["dur"]]
            # each enclosing range once, in the order they opened (a set's order changed with the hash
            # seed, and with it the order of equal totals in the table)
            for rng in dict.fromkeys(str(r.get("name", "")) for r in open_):
                acc[(rng, name)].append(ns)
    rows = []
    for (rng, name), values in acc.items():
        rows.append({"domain": "", "range": rng, "style": "PushPop", "nvtx_inst": len(instances.get(rng, [])),
                     **stats_row(values, "kern_inst"), "name": name})
    rows.sort(key=lambda r: -r["total_time_ns"])
    return rows


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def gpu_busy_ms(text: str) -> float | None:
    """Milliseconds in which the GPU ran at least one kernel, copy or memset (gpu_busy_ms_of_events) in a trace's
    text. None when the trace has no GPU activity or is not a trace."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    return gpu_busy_ms_of_events(events) if isinstance(events, list) else None


def gpu_busy_ms_of_events(events: list[Any]) -> float | None:
    """Milliseconds in which the GPU ran at least one kernel, copy or memset: the union of their intervals
    (overlapping streams count once). None when the events hold no GPU activity."""
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                   if isinstance(e, dict) and e.get("cat") in GPU_CATS and e.get("ph") == "X"
                   and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float)))
    if not spans:
        return None
    total, (lo, hi) = 0.0, spans[0]
    for start, end in spans[1:]:
        if start > hi:
            total, lo, hi = total + hi - lo, start, end
        else:
            hi = max(hi, end)
    return (total + hi - lo) / 1e3  # trace times are microseconds

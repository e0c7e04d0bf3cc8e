"""A torch profiler trace (Chrome trace JSON, .json or .json.gz: what `perfconsole run --profile torch` writes), or an
Nsight Systems capture exported to SQLite (read into the same events by core.profiling.nsys_sqlite), as a
Timeline. One trace a rank: a data-parallel job's ranks each wrote their own (core.measure.job), and each becomes a
lane group. The event categories are the ones core.profiling.torch_trace reads for the tables (kernels, copies and
memsets, `user_annotation` ranges and the runtime's launches, paired with their kernels by `correlation`), plus the
ranges' GPU-side twins (`gpu_user_annotation`) and, in a CPU-only trace, the host threads' outermost CPU ops.

Steps: `ProfilerStep#N` ranges where the trace has them; else each `forward` range opens a step (the worker opens
one a step). A step's window covers its host side (from its range to the next step's) and its device side (from
the first to the last kernel launched in it), so fitting a step shows both the issuing and the running.
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from perfconsole.core.profiling.categories import CATEGORIES, categorize
from perfconsole.core.profiling.torch_trace import (GPU_CATS, LAUNCH_CATS, RANGE_CATS, looks_like_torch_trace,
                                                     trace_text)
from perfconsole.core.timeline.index import IntervalIndex
from perfconsole.core.timeline.model import (CPU_OPS, GPU_RANGES, KERNELS, LAUNCHES, MEMORY, RANGES, Lane, RankTrace,
                                             Step, Timeline, TimelineError)

GPU_RANGE_CATS = ("gpu_user_annotation",)
STEP_RANGE = re.compile(r"^ProfilerStep#\d+$")
STEP_PHASE = "forward"
_CAT_CODE = {c: i for i, c in enumerate(CATEGORIES)}


def read_trace(path: Path) -> dict[str, Any]:
    """The trace's JSON document (an nsys SQLite export's events in the same shape: core.profiling.nsys_sqlite);
    TimelineError when the file is missing, unreadable or neither."""
    path = Path(path)
    if path.suffix.lower() == ".sqlite":
        from perfconsole.core.profiling.errors import ProfileError
        from perfconsole.core.profiling.nsys_sqlite import trace_document

        try:
            return trace_document(path)
        except ProfileError as exc:
            raise TimelineError(str(exc)) from None
    try:
        text = trace_text(path)
    except FileNotFoundError:
        raise TimelineError(f"{path}: no such file or directory") from None
    except (OSError, EOFError) as exc:
        raise TimelineError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    if not looks_like_torch_trace(text):
        raise TimelineError(f"{path}: not a torch profiler trace (no traceEvents)")
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TimelineError(f"{path}: not a torch trace ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TimelineError(f"{path}: not a torch trace (no traceEvents list)")
    return doc


def load_timeline(paths: Sequence[Path | str], ranks: Sequence[int] | None = None) -> Timeline:
    """The timeline of one trace, or of a job's traces (one a rank, rank i the i-th path unless `ranks` says)."""
    read = [(Path(p), read_trace(Path(p))) for p in paths]
    docs = [(path, _spans(doc)) for path, doc in read]
    _one_clock([doc.get("baseTimeNanoseconds") for _, doc in read], [spans for _, spans in docs])
    starts = [min(float(e["ts"]) for e in spans) for _, spans in docs if spans]
    if not starts:
        raise TimelineError(f"{docs[0][0]}: a trace with no timed events")
    origin = min(starts)
    names: dict[str, int] = {}
    lanes: list[Lane] = []
    out: list[RankTrace] = []
    for i, (path, spans) in enumerate(docs):
        rank = ranks[i] if ranks is not None else i
        out.append(_rank(rank, path, spans, origin, names, lanes))
    return Timeline(out, lanes, list(names), origin)


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"
            and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]


def _one_clock(bases: list[Any], spans: list[list[dict[str, Any]]]) -> None:
    """Each trace's times are us from its `baseTimeNanoseconds` (Kineto writes one constant for every rank; an nsys
    export's is its session's start, each rank's its own): where the bases differ, each trace's events move by its
    base's distance from the earliest, so that the ranks share one clock."""
    if not all(isinstance(b, int) for b in bases) or len(set(bases)) < 2:
        return
    low = min(bases)
    for base, events in zip(bases, spans):
        shift = (base - low) / 1000.0
        if shift:
            for e in events:
                e["ts"] = e["ts"] + shift


def _ns(events: list[dict[str, Any]], origin: float) -> tuple[np.ndarray, np.ndarray]:
    ts = np.fromiter((e["ts"] for e in events), dtype=np.float64, count=len(events))
    dur = np.fromiter((max(0.0, e["dur"]) for e in events), dtype=np.float64, count=len(events))
    start = np.rint((ts - origin) * 1000.0).astype(np.int64)   # trace times are microseconds
    return start, start + np.rint(dur * 1000.0).astype(np.int64)


def _rank(rank: int, path: Path, spans: list[dict[str, Any]], origin: float, names: dict[str, int],
          lanes: list[Lane]) -> RankTrace:
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in spans:
        by_cat[str(e.get("cat"))].append(e)
    tag = f"r{rank} "
    launches = {e.get("args", {}).get("correlation"): e for c in LAUNCH_CATS for e in by_cat.get(c, [])}
    launches.pop(None, None)
    gpu = [e for c in GPU_CATS for e in by_cat.get(c, [])]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in gpu:
        args = e.get("args", {})
        device = f"gpu{args.get('device', e.get('pid'))}"
        groups[(device, f"s{args.get('stream', e.get('tid'))}" if e.get("cat") == "kernel" else "mem")].append(e)
    for (device, what), events in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "mem", kv[0][1])):
        lanes.append(_lane(f"{tag}{device} {what}", rank, MEMORY if what == "mem" else KERNELS, f"{device} {what}",
                           events, origin, names, device, launches))
    ranges = by_cat.get(RANGE_CATS[0], [])
    for depth, events in enumerate(_by_depth(ranges)):
        lanes.append(_lane(f"{tag}ranges {depth}", rank, RANGES, "ranges" if depth == 0 else " " + ">" * depth,
                           events, origin, names, "", None, depth))
    gpu_ranges: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in (e for c in GPU_RANGE_CATS for e in by_cat.get(c, [])):
        gpu_ranges[f"gpu{e.get('args', {}).get('device', e.get('pid'))}"].append(e)
    for device, events in sorted(gpu_ranges.items()):
        for depth, level in enumerate(_by_depth(events)):
            lanes.append(_lane(f"{tag}{device} ranges {depth}", rank, GPU_RANGES,
                               f"{device} ranges" if depth == 0 else " " + ">" * depth, level, origin, names,
                               device, None, depth))
    for (_pid, tid), events in sorted(_by_thread([e for c in LAUNCH_CATS for e in by_cat.get(c, [])]).items(), key=str):
        lanes.append(_lane(f"{tag}t{tid} launch", rank, LAUNCHES, f"t{tid} launch", events, origin, names, ""))
    device = sorted(groups)[0][0] if groups else "cpu"
    if not gpu:  # a CPU-only trace: the host threads' outermost ops are what ran
        for (_pid, tid), events in sorted(_by_thread(by_cat.get("cpu_op", [])).items(), key=str):
            outer = _by_depth(events)[:1]
            if outer:
                lanes.append(_lane(f"{tag}cpu t{tid}", rank, CPU_OPS, f"cpu t{tid}", outer[0], origin, names, "cpu"))
    return RankTrace(rank, str(path), _steps(ranges, gpu, launches, origin), device)


def _lane(key: str, rank: int, kind: str, label: str, events: list[dict[str, Any]], origin: float,
          names: dict[str, int], device: str, launches: dict[Any, dict[str, Any]] | None = None,
          depth: int = 0) -> Lane:
    start, end = _ns(events, origin)
    index = IntervalIndex(start, end)
    order = index.order
    codes = np.fromiter((names.setdefault(str(e.get("name", "")), len(names)) for e in events), dtype=np.int32,
                        count=len(events))[order]
    categorized = kind in (KERNELS, MEMORY, CPU_OPS)
    cats = np.fromiter((_CAT_CODE[categorize(str(e.get("name", "")))] if categorized else -1 for e in events),
                       dtype=np.int8, count=len(events))[order]
    lane = Lane(key, rank, kind, label, index, codes, cats, depth, device)
    if kind == KERNELS:
        lane.dims = np.array([_dims(e.get("args", {})) for e in events], dtype=np.int64).reshape(-1, 6)[order]
    if kind in (KERNELS, MEMORY) and launches is not None:
        found = [launches.get(e.get("args", {}).get("correlation")) for e in events]
        lane.launch_ns = np.fromiter((np.rint((f["ts"] - origin) * 1000.0) if f else -1 for f in found),
                                     dtype=np.int64, count=len(found))[order]
        lane.graph = np.fromiter((bool(f) and "Graph" in str(f.get("name", "")) for f in found), dtype=bool,
                                 count=len(found))[order]
    return lane


def _dims(args: Any) -> list[int]:
    """A kernel event's grid and block, x y z each (zeros where the trace does not give both)."""
    try:
        grid, block = [int(v) for v in args["grid"]], [int(v) for v in args["block"]]
    except (KeyError, TypeError, ValueError):
        return [0] * 6
    return (grid + [1, 1, 1])[:3] + (block + [1, 1, 1])[:3] if grid and block else [0] * 6


def _by_thread(events: list[dict[str, Any]]) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    out: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        out[(e.get("pid"), e.get("tid"))].append(e)
    return out


def _by_depth(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Events by nesting depth (0: not inside another), each thread's stack of its own; one that starts inside
    another and outlasts it goes one deeper all the same."""
    levels: list[list[dict[str, Any]]] = []
    for _, evs in sorted(_by_thread(events).items(), key=str):
        stack: list[float] = []   # the ends of the open events
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1]:
                stack.pop()
            if len(levels) <= len(stack):
                levels.append([])
            levels[len(stack)].append(e)
            stack.append(e["ts"] + e["dur"])
    return levels


def _steps(ranges: list[dict[str, Any]], gpu: list[dict[str, Any]], launches: dict[Any, dict[str, Any]],
           origin: float) -> list[Step]:
    marks = sorted((e for e in ranges if STEP_RANGE.match(str(e.get("name", "")))), key=lambda e: e["ts"])
    if not marks:
        marks = sorted((e for e in ranges if e.get("name") == STEP_PHASE), key=lambda e: e["ts"])
    if not marks:
        return []
    host_start, _ = _ns(marks, origin)
    _, range_end = _ns(ranges, origin)
    host_end = np.append(host_start[1:], range_end.max())
    # each kernel's step: the last step opened on the host before its launch
    launched = [(launches.get(e.get("args", {}).get("correlation")), e) for e in gpu]
    launched = [(f, e) for f, e in launched if f is not None]
    steps = []
    if launched:
        at, _ = _ns([f for f, _ in launched], origin)
        k_start, k_end = _ns([e for _, e in launched], origin)
        which = np.searchsorted(host_start, at, side="right") - 1
    for i in range(len(marks)):
        lo, hi = int(host_start[i]), int(host_end[i])
        if launched:
            mine = which == i
            if mine.any():
                lo, hi = min(lo, int(k_start[mine].min())), max(hi, int(k_end[mine].max()))
        steps.append(Step(i + 1, lo, hi))
    return steps

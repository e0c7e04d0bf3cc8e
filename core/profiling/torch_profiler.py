"""torch.profiler capture that yields the same tables as nsys (the fallback when nsys is absent).

The worker wraps the measured steps in `TorchCapture`; the model's ranges come from `range_factory()`
(record_function, named like the NVTX ranges). Afterwards `.tables()` gives a cuda_gpu_kern_sum-shaped
table (GPU kernels on CUDA, CPU ops by self time on CPU), nvtx_sum from the ranges, and nvtx_kern_sum
(kernels or ops under each range, every enclosing range counted, as nsys does), and `.files` the
Chrome trace for Perfetto. On CUDA the tables are read back from that trace (core.profiling.torch_trace),
which holds each kernel once; the profiler's event list is the CPU's source, and CUDA's where no trace
was written. The trace is parsed once (`events()`): the tables, the GPU's busy share and a rank's
communication overlap all read the same events (an eager 2.7B step's trace holds ~60,000 of them).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from perfconsole.core.profiling.columns import Row, Tables
from perfconsole.core.profiling.summary_rows import stats_row, with_time_pct
from perfconsole.core.profiling.torch_trace import tables_of_events

_RANGE_NAMES: set[str] = set()  # every name opened through range_factory, to tell ranges from ops


def range_factory() -> Callable[[str], AbstractContextManager[Any]]:
    """name -> record_function(name), for perfconsole.model.annotate.set_range_factory."""
    def open_range(name: str) -> AbstractContextManager[Any]:
        _RANGE_NAMES.add(name)
        return record_function(name)
    return open_range


class TorchCapture:
    """Context manager around the measured steps; tables() after exit."""

    def __init__(self, out_dir: Path, device: str) -> None:
        self.out_dir = Path(out_dir)
        self.device = device
        self.files: list[str] = []
        self._prof: profile | None = None
        self._tables: Tables | None = None
        self._events: list[Any] | None = None

    def __enter__(self) -> TorchCapture:
        activities = [ProfilerActivity.CPU]
        if self.device.startswith("cuda"):
            activities.append(ProfilerActivity.CUDA)
        self._prof = profile(activities=activities, record_shapes=False)
        self._prof.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._prof is not None
        self._prof.__exit__(exc_type, exc, tb)
        if exc_type is None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            trace = self.out_dir / "torch_trace.json"
            self._prof.export_chrome_trace(str(trace))
            self.files.append(str(trace))

    def tables(self) -> Tables:
        if self._prof is None:
            raise RuntimeError("TorchCapture.tables() before the capture ran")
        if self._tables is None:
            self._tables = self._from_trace() or self._build(list(self._prof.events()))
        return self._tables

    def events(self) -> list[Any]:
        """The Chrome trace's events, parsed once ([] without a trace, or one that is not JSON)."""
        if self._events is None:
            self._events = []
            if self.files:
                try:
                    doc = json.loads(Path(self.files[0]).read_text(encoding="utf-8", errors="replace"))
                except (OSError, ValueError, RecursionError):
                    doc = None
                events = doc.get("traceEvents") if isinstance(doc, dict) else None
                self._events = events if isinstance(events, list) else []
        return self._events

    def _from_trace(self) -> Tables | None:
        """On CUDA, the tables of the Chrome trace just written, where Kineto lists each kernel once; None
        without one. The profiler's FunctionEvents listed kernels again that the trace holds once: a
        bf16-weights CUDA-graph ladder rung of hf:llama 1B on an H200 gave 1,500 multi-tensor (AdamW,
        foreach) kernels in 3 steps where its trace holds 342, and 203.7 ms of kernels a step in a 155.4 ms
        step. The ranges kept are the run's own (record_function ones torch opens itself are left out)."""
        if not self.device.startswith("cuda") or not self.events():
            return None
        tables, _ = tables_of_events(self.events(), Path(self.files[0]).name)
        if not tables.get("cuda_gpu_kern_sum"):
            return None
        own = [{k: v for k, v in r.items() if k != "time_pct"} for r in tables.get("nvtx_sum", [])
               if r["range"] in _RANGE_NAMES]
        tables["nvtx_sum"] = with_time_pct(own)
        tables["nvtx_kern_sum"] = [r for r in tables.get("nvtx_kern_sum", []) if r["range"] in _RANGE_NAMES]
        return tables

    def _build(self, events: list[Any]) -> Tables:
        on_gpu = self.device.startswith("cuda")
        # On CUDA, Kineto reports each record_function twice: the CPU range and a gpu_user_annotation
        # twin on the device. nsys's NVTX ranges are host push/pop, so only the CPU side counts.
        ranges = [e for e in events if e.name in _RANGE_NAMES and e.device_type == torch.autograd.DeviceType.CPU]
        leaves = list(_leaves(events, on_gpu))
        kern: dict[str, list[int]] = {}
        for name, ns, _ in leaves:
            kern.setdefault(name, []).append(ns)
        tables: Tables = {"cuda_gpu_kern_sum": with_time_pct([{**stats_row(v, "instances"), "name": k}
                                                          for k, v in kern.items()])}
        by_range: dict[str, list[int]] = {}
        for e in ranges:
            by_range.setdefault(e.name, []).append(round((e.time_range.end - e.time_range.start) * 1000))
        tables["nvtx_sum"] = with_time_pct([{**stats_row(v, "instances"), "style": "PushPop", "domain": "", "range": k}
                                        for k, v in by_range.items()])
        tables["nvtx_kern_sum"] = _range_kernels(ranges, leaves, by_range)
        return tables


def _leaves(events: Iterable[Any], on_gpu: bool) -> Iterable[tuple[str, int, Any]]:
    """(name, ns, owning CPU event): GPU kernels on CUDA, CPU ops by self time on CPU (ranges excluded)."""
    events = list(events)
    if not on_gpu:
        for e in events:
            if e.name in _RANGE_NAMES or e.name.startswith("ProfilerStep"):
                continue
            if e.device_type == torch.autograd.DeviceType.CPU and e.self_cpu_time_total > 0:
                yield e.name, round(e.self_cpu_time_total * 1000), e
        return
    # Each device event once. torch attaches a kernel to every CPU op that carries its correlation id
    # (FunctionEvent.kernels), and with torch.compile in the process several ops can carry the same id:
    # a compiled 2.7B step's fused AdamW kernels were counted 6 times over (162 ms a step in a 113 ms step).
    if events and not hasattr(events[0], "linked_correlation_id"):  # a torch that does not link them
        for e in events:
            if e.name not in _RANGE_NAMES and not e.name.startswith("ProfilerStep"):
                for k in e.kernels:
                    yield k.name, round(k.duration * 1000), e
        return
    owners: dict[int, list[Any]] = {}
    launches: dict[int, float] = {}
    for e in events:
        if e.device_type != torch.autograd.DeviceType.CPU or e.is_async:
            continue
        if e.linked_correlation_id == 0:
            owners.setdefault(e.id, []).append(e)
        else:  # the runtime's launch call (cudaLaunchKernel ...), linked to the op that made it
            launches.setdefault(e.linked_correlation_id, e.time_range.start)
    # A kernel runs once on its stream: device events with the same name, device and interval are one
    # kernel reported more than once (a ladder's 2.7B CUDA-graph rung listed each fused AdamW kernel ~9
    # times, 265 ms a step in a 109 ms step).
    seen: set[tuple[str, int, float, float]] = set()
    for e in events:
        if (e.device_type != torch.autograd.DeviceType.CUDA or getattr(e, "is_user_annotation", False)
                or e.name in _RANGE_NAMES or e.linked_correlation_id <= 0):
            continue
        key = (e.name, e.device_index, e.time_range.start, e.time_range.end)
        if key in seen:
            continue
        seen.add(key)
        yield (e.name, round((e.time_range.end - e.time_range.start) * 1000),
               _owner(owners.get(e.linked_correlation_id, []), launches.get(e.linked_correlation_id)))


def _owner(candidates: list[Any], launched_at: float | None) -> Any:
    """The op that launched a kernel: of the ops with its correlation id, the innermost one open at the launch."""
    if launched_at is not None:
        open_then = [c for c in candidates if c.time_range.start <= launched_at <= c.time_range.end]
        candidates = open_then or candidates
    return max(candidates, key=lambda c: c.time_range.start, default=None)


def _range_kernels(ranges: list[Any], leaves: list[tuple[str, int, Any]],
                   instances: dict[str, list[int]]) -> list[Row]:
    """nvtx_kern_sum rows: each kernel (op) under every enclosing range, like nsys."""
    acc: dict[tuple[str, str], list[int]] = {}
    range_ids = {id(e) for e in ranges}
    for name, ns, owner in leaves:
        seen: set[str] = set()
        parent = owner
        while parent is not None:
            if id(parent) in range_ids and parent.name not in seen:  # recursion (same name twice) counts once
                seen.add(parent.name)
                acc.setdefault((parent.name, name), []).append(ns)
            parent = parent.cpu_parent
    rows = []
    for (rng, name), values in acc.items():
        s = stats_row(values, "kern_inst")
        rows.append({"domain": "", "range": rng, "style": "PushPop", "nvtx_inst": len(instances.get(rng, [])),
                     **s, "name": name})
    rows.sort(key=lambda r: -r["total_time_ns"])
    return rows

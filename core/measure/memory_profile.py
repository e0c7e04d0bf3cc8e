"""CUDA memory profiling of the measured steps, done inside the worker.

`MemoryCapture` records the allocator's history (`torch.cuda.memory._record_memory_history`) over the
measured steps, reads peak allocated / reserved memory after every phase, dumps the snapshot for
pytorch.org/memory_viz (pickle protocol 4, the format that page reads) and extracts from the same
in-memory snapshot what the console shows: a memory-over-time series and the largest allocations with
the Python frames that made them. The console only ever reads that JSON; it never unpickles anything.
"""
from __future__ import annotations

import contextlib
import pickle
from collections import defaultdict
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.paths import safe_name
from perfconsole.core.settings import RunSpec

MIB = float(2**20)
MAX_ENTRIES = 200_000          # allocator events kept; older ones drop off, as memory_viz expects
TIMELINE_POINTS = 400          # enough for a terminal chart; each point keeps its bucket's maximum
TOP_ALLOCATIONS = 10
FRAMES_PER_ALLOCATION = 6
PHASES = ("forward", "backward", "optimizer_step")

# Frames from these files say where inside torch an allocation happened, not which model code asked.
_INTERNAL = ("torch/nn/modules/module.py", "torch/_tensor.py", "torch/autograd/", "torch/utils/_",
             "torch/amp/", "torch/optim/", "contextlib.py", "torch/_dynamo/", "torch/_ops.py")


def snapshot_file(out_dir: Path, spec: RunSpec) -> Path:
    """Named by run, so snapshots of several runs can sit in one folder."""
    return out_dir / f"memory-{safe_name(spec.label())}.pickle"


def dump_snapshot(snapshot: dict[str, Any], path: Path) -> Path:
    """Protocol 4 is what pytorch.org/memory_viz reads (its Python-free unpickler)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(snapshot, f, protocol=4)
    tmp.replace(path)
    return path


def _trace(snapshot: dict[str, Any], device: int = 0) -> list[dict[str, Any]]:
    traces = snapshot.get("device_traces") or []
    return list(traces[device]) if device < len(traces) else []


def timeline(snapshot: dict[str, Any], baseline_bytes: int = 0, points: int = TIMELINE_POINTS,
             device: int = 0) -> dict[str, list[float]]:
    """Allocated MiB after every allocator event, bucketed down to `points` (max per bucket).

    `baseline_bytes` is what was allocated when recording began (weights, optimizer state), which
    the trace cannot see. `t_ms` is milliseconds since the first event, or the event index where
    this torch records no times.
    """
    level = baseline_bytes
    xs: list[float] = []
    ys: list[float] = []
    entries = [e for e in _trace(snapshot, device) if e.get("action") in ("alloc", "free_completed")]
    t0 = entries[0].get("time_us") if entries else None
    for i, e in enumerate(entries):
        level += e["size"] if e["action"] == "alloc" else -e["size"]
        t = e.get("time_us")
        xs.append((t - t0) / 1e3 if t is not None and t0 is not None else float(i))
        ys.append(level / MIB)
    if len(xs) <= points:
        return {"t_ms": xs, "allocated_mib": ys}
    out_x: list[float] = []
    out_y: list[float] = []
    per = len(xs) / points
    for b in range(points):
        lo, hi = int(b * per), max(int((b + 1) * per), int(b * per) + 1)
        j = max(range(lo, min(hi, len(ys))), key=ys.__getitem__)
        out_x.append(xs[j])
        out_y.append(ys[j])
    return {"t_ms": out_x, "allocated_mib": out_y}


def _frames(entry: dict[str, Any]) -> list[str]:
    frames = entry.get("frames") or []
    shown = [f for f in frames if not any(p in f.get("filename", "") for p in _INTERNAL)] or frames
    return [f"{f.get('filename', '?')}:{f.get('line', '?')} {f.get('name', '?')}"
            for f in shown[:FRAMES_PER_ALLOCATION]]


def top_allocations(snapshot: dict[str, Any], n: int = TOP_ALLOCATIONS, device: int = 0) -> list[dict[str, Any]]:
    """The largest allocations, grouped by size and call site: size, count and the frames."""
    groups: dict[tuple[int, tuple[str, ...]], int] = defaultdict(int)
    for e in _trace(snapshot, device):
        if e.get("action") == "alloc":
            groups[(e["size"], tuple(_frames(e)))] += 1
    ranked = sorted(groups.items(), key=lambda kv: (-kv[0][0], -kv[1]))[:n]
    return [{"size_mib": size / MIB, "count": count, "frames": list(frames)}
            for (size, frames), count in ranked]


class MemoryCapture:
    """Context manager around the measured steps; `after_phase` is called by the timed loop."""

    def __init__(self, out_dir: Path, spec: RunSpec) -> None:
        self.out_dir = Path(out_dir)
        self.spec = spec
        self.per_phase: dict[str, dict[str, float]] = {}
        self.baseline_bytes = 0
        self.peak_alloc = 0.0
        self.peak_reserved = 0.0
        self.snapshot_path: Path | None = None
        self.details: dict[str, Any] = {}

    def __enter__(self) -> MemoryCapture:
        import torch

        torch.cuda.synchronize()
        self.baseline_bytes = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=MAX_ENTRIES)
        return self

    def after_phase(self, phase: str) -> None:
        """Fold this phase's peak into its running maximum over steps, then start the next phase's."""
        import torch

        torch.cuda.synchronize()
        alloc = torch.cuda.max_memory_allocated() / MIB
        reserved = torch.cuda.max_memory_reserved() / MIB
        held = torch.cuda.memory_allocated() / MIB
        p = self.per_phase.setdefault(phase, {"peak_allocated_mib": 0.0, "peak_reserved_mib": 0.0,
                                               "allocated_after_mib": 0.0})
        p["peak_allocated_mib"] = max(p["peak_allocated_mib"], alloc)
        p["peak_reserved_mib"] = max(p["peak_reserved_mib"], reserved)
        p["allocated_after_mib"] = max(p["allocated_after_mib"], held)
        self.peak_alloc = max(self.peak_alloc, alloc)
        self.peak_reserved = max(self.peak_reserved, reserved)
        torch.cuda.reset_peak_memory_stats()

    def __exit__(self, exc_type, exc, tb) -> None:
        import torch

        try:
            if exc_type is None:
                torch.cuda.synchronize()
                snap = torch.cuda.memory._snapshot()
                self.snapshot_path = dump_snapshot(snap, snapshot_file(self.out_dir, self.spec))
                self.details = {
                    "baseline_mib": self.baseline_bytes / MIB,
                    "timeline": timeline(snap, self.baseline_bytes),
                    "top_allocations": top_allocations(snap),
                    "viewer": "https://pytorch.org/memory_viz",
                }
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)

    def event(self, peak_alloc: float, peak_reserved: float) -> ev.Memory:
        # The counters were reset after each phase, so the callers' end-of-run reading is only the
        # last phase's; the maximum over phases is the run's peak.
        alloc = max(self.peak_alloc, peak_alloc)
        reserved = max(self.peak_reserved, peak_reserved)
        return ev.Memory(alloc, reserved, {k: dict(v) for k, v in self.per_phase.items()},
                         str(self.snapshot_path) if self.snapshot_path else None, self.details)


class NoMemory(contextlib.nullcontext):
    """A run without a memory capture: its Memory event holds the peaks alone."""
    after_phase = None

    def event(self, peak_alloc: float, peak_reserved: float) -> ev.Memory:
        return ev.Memory(peak_alloc, peak_reserved)


def capture(spec: RunSpec, out_dir: Path | None) -> MemoryCapture | NoMemory:
    """The measured steps' memory capture the spec asks for (`--memory`), else none."""
    return MemoryCapture(out_dir or Path.cwd(), spec) if spec.memory else NoMemory()


def alloc_retries(device: Any) -> int:
    """The caching allocator's retries so far on this device (cudaFree of its cache, then malloc again)."""
    import torch

    return int(torch.cuda.memory_stats(device).get("num_alloc_retries", 0))


def retry_warning(retries: int, steps: int) -> str:
    """What a step time that includes the allocator's retries cannot vouch for, in figures."""
    return (f"the caching allocator ran out of cached memory {retries} times in {steps} step{'s' * (steps != 1)} "
            "and freed its cache each time (a device synchronisation): these steps run at the memory's edge and are "
            "slower than the same program with room to spare; a smaller batch, or PYTORCH_CUDA_ALLOC_CONF="
            "expandable_segments:True, gives it room")

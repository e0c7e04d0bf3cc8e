"""The timeline model: lanes of intervals, per rank, with the steps, the device's idle gaps and its busy share.

A lane is one row of the drawing: a GPU stream's kernels, a device's copies and memsets, the record_function
ranges at one nesting depth (host or GPU side), a host thread's CUDA launches, or, in a CPU-only trace, a host
thread's outermost CPU ops. Times are int64 ns from the timeline's origin (the earliest event of every rank's
trace). A kernel's phase is the range around it: the GPU-side range (`gpu_user_annotation`) where its launch was
a CUDA graph's (the host range holds only the graph launch), else the host ranges open at its launch.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from perfconsole.core.profiling.categories import CATEGORIES
from perfconsole.core.timeline.index import IntervalIndex, union

KERNELS, MEMORY, RANGES, GPU_RANGES, LAUNCHES, CPU_OPS = "kernels", "memory", "ranges", "gpu_ranges", "launches", "cpu_ops"
DEVICE_KINDS = (KERNELS, MEMORY, CPU_OPS)   # the lanes whose union is the device's busy time


class TimelineError(Exception):
    """A file the timeline cannot read: one line naming it and why."""


@dataclass
class Lane:
    key: str                  # unique in the timeline: "r0 gpu0 s7"
    rank: int
    kind: str
    label: str                # what the drawing's first column shows
    index: IntervalIndex
    names: np.ndarray         # int32 codes into Timeline.names, in start order
    cats: np.ndarray          # int8 codes into CATEGORIES (-1: none), in start order
    depth: int = 0            # for range lanes: the nesting depth it holds
    device: str = ""          # "gpu0", "cpu": the device whose busy time it counts in
    launch_ns: np.ndarray | None = None   # kernels: when the host launched each (-1: launch not in the trace)
    graph: np.ndarray | None = None       # kernels: launched by a CUDA graph launch
    dims: np.ndarray | None = None        # kernels: grid x, y, z and block x, y, z a row (0: not in the trace)
    _by_cat: dict[int, IntervalIndex] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.index)

    def category_index(self, code: int) -> IntervalIndex:
        """The lane's intervals of one category, indexed on first use (for per-column dominant categories)."""
        held = self._by_cat.get(code)
        if held is None:
            mask = self.cats == code
            held = self._by_cat[code] = IntervalIndex(self.index.starts[mask], self.index.ends[mask])
        return held

    def present_categories(self) -> list[int]:
        return [int(c) for c in np.unique(self.cats) if c >= 0]


@dataclass(frozen=True)
class Step:
    index: int                # 1-based, in trace order
    start: int
    end: int


@dataclass(frozen=True)
class Kernel:
    """One interval of a lane, as the console and the CLI describe it."""
    lane: str
    position: int
    name: str
    start: int
    end: int
    category: str
    phase: str
    grid: tuple[int, int, int] | None = None    # where the trace gives the launch's grid and block
    block: tuple[int, int, int] | None = None

    @property
    def duration(self) -> int:
        return self.end - self.start


@dataclass
class RankTrace:
    rank: int
    source: str               # the trace file
    steps: list[Step]
    device: str               # what the gaps and busy share are of: "gpu0", or "cpu" in a CPU-only trace
    _busy: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)


class Timeline:
    def __init__(self, ranks: list[RankTrace], lanes: list[Lane], names: list[str], origin_us: float) -> None:
        self.ranks = ranks
        self.lanes = lanes
        self.names = names
        self.origin_us = origin_us    # the trace clock (us) at t = 0

    def rank(self, r: int) -> RankTrace:
        for rt in self.ranks:
            if rt.rank == r:
                return rt
        raise TimelineError(f"no rank {r} (ranks: {', '.join(str(x.rank) for x in self.ranks)})")

    def lane(self, key: str) -> Lane:
        return next(lane for lane in self.lanes if lane.key == key)

    def lanes_of(self, rank: int | None = None, launches: bool = False) -> list[Lane]:
        return [lane for lane in self.lanes if (rank is None or lane.rank == rank)
                and (launches or lane.kind != LAUNCHES)]

    def kernel_lanes(self, rank: int | None = None) -> list[Lane]:
        return [lane for lane in self.lanes_of(rank) if lane.kind in DEVICE_KINDS]

    def span(self, rank: int | None = None) -> tuple[int, int]:
        spans = [lane.index.span for lane in self.lanes_of(rank, launches=True) if len(lane)]
        if not spans:
            return 0, 1
        return min(s for s, _ in spans), max(max(e for _, e in spans), min(s for s, _ in spans) + 1)

    # --- steps, busy time and gaps ------------------------------------------------------------------
    def step(self, n: int, rank: int | None = None) -> Step:
        rt = self.ranks[0] if rank is None else self.rank(rank)
        if not rt.steps:
            raise TimelineError(f"{rt.source}: no steps in the trace (no ProfilerStep or forward ranges)")
        if not 1 <= n <= len(rt.steps):
            raise TimelineError(f"--step {n}: the trace holds steps 1 to {len(rt.steps)}")
        return rt.steps[n - 1]

    def step_at(self, t: int, rank: int | None = None) -> Step | None:
        rt = self.ranks[0] if rank is None else self.rank(rank)
        return next((s for s in rt.steps if s.start <= t < s.end), None)

    def busy(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """The device's busy intervals (the union of its kernels, copies and memsets; or its CPU ops), merged."""
        rt = self.rank(rank)
        if rt._busy is None:
            lanes = [lane for lane in self.kernel_lanes(rank) if lane.device == rt.device]
            rt._busy = union(np.concatenate([lane.index.starts for lane in lanes] or [np.empty(0, np.int64)]),
                             np.concatenate([lane.index.ends for lane in lanes] or [np.empty(0, np.int64)]))
        return rt._busy

    def gaps(self, rank: int, t0: int, t1: int, min_ns: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """The device's idle intervals inside [t0, t1) at least min_ns long, as (starts, ends)."""
        s, e = self.busy(rank)
        lo = int(np.searchsorted(e, t0, side="right"))
        hi = int(np.searchsorted(s, t1, side="left"))
        s, e = np.clip(s[lo:hi], t0, t1), np.clip(e[lo:hi], t0, t1)
        gs = np.concatenate(([t0], e))
        ge = np.concatenate((s, [t1]))
        keep = (ge - gs) >= max(1, min_ns)
        return gs[keep], ge[keep]

    def busy_share(self, rank: int, t0: int, t1: int) -> float:
        s, e = self.busy(rank)
        total = int(np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None).sum())
        return total / (t1 - t0) if t1 > t0 else 0.0

    # --- kernels ------------------------------------------------------------------------------------
    def kernel(self, key: str, position: int) -> Kernel:
        lane = self.lane(key)
        code = int(lane.cats[position])
        start, end = int(lane.index.starts[position]), int(lane.index.ends[position])
        dims = [int(x) for x in lane.dims[position]] if lane.dims is not None else [0] * 6
        grid, block = (tuple(dims[:3]), tuple(dims[3:])) if dims[0] > 0 and dims[3] > 0 else (None, None)
        return Kernel(key, position, self.names[int(lane.names[position])], start, end,
                      CATEGORIES[code] if code >= 0 else lane.kind, self.phase(lane, position), grid, block)

    def phase(self, lane: Lane, position: int) -> str:
        """The ranges around a kernel, outermost first ("forward > layer_0 > ffn_sublayer"); "" where none."""
        if lane.kind == CPU_OPS:
            return self._ranges_at(lane.rank, RANGES, int(lane.index.starts[position]), lane.device)
        graph = lane.graph is not None and bool(lane.graph[position])
        launched = int(lane.launch_ns[position]) if lane.launch_ns is not None else -1
        on_gpu = self._ranges_at(lane.rank, GPU_RANGES, int(lane.index.starts[position]), lane.device)
        if graph or launched < 0:
            return on_gpu
        return self._ranges_at(lane.rank, RANGES, launched, "") or on_gpu

    def _ranges_at(self, rank: int, kind: str, t: int, device: str) -> str:
        names = []
        for lane in sorted((x for x in self.lanes_of(rank) if x.kind == kind
                            and (kind == RANGES or x.device == device)), key=lambda x: x.depth):
            hit = lane.index.at(t)
            if hit is not None:
                names.append(self.names[int(lane.names[hit])])
        return " > ".join(names)

    def find(self, key: str, t: int, forward: bool = True) -> int | None:
        """The position of the next (or previous) interval of a lane starting after (before) t."""
        index = self.lane(key).index
        return index.next_start(t) if forward else index.previous_start(t)

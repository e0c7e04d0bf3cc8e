"""Kernel time by category, per NVTX phase, top kernels, softmax against the attention matmuls: the
analyses of a profile's tables, derived on demand and never stored.

The category of a name, and of a column of names, comes from core.profiling.categories. The analyses read
the tables as DataFrames (a ProfileTable's own, or one built from a snapshot's rows) and give what the row-by-row
versions gave, to the value and the order: sums in Python ints (exact past 2**53), ties kept in table
order.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any


from perfconsole.core.profiling.lazy_imports import numpy as np, pandas as pd
from perfconsole.core.profiling.categories import categorize_column
from perfconsole.core.profiling.categories import CATEGORIES, categorize
from perfconsole.core.profiling.table import TableFrames, frames_of

__all__ = ["category_shares", "phase_shares", "top_kernels", "top_kernels_per_range", "softmax_vs_matmuls",
           "forward_check", "CategoryShare", "PhaseShares", "TopKernel", "RangeTopKernels", "SoftmaxVsMatmuls",
           "ForwardCheck", "PHASES", "ATTENTION_RANGES"]

Tables = Mapping[str, Sequence[dict[str, Any]]]
# Every analysis reads a profile's tables, or the frames of a loaded profile (core.profiling.loaded) built once.
Source = Tables | TableFrames

PHASES = ("forward", "backward", "optimizer_step")
ATTENTION_RANGES = ("computing attention scores", "computing softmax", "final matmul")


@dataclass(frozen=True)
class CategoryShare:
    category: str
    total_ns: int
    share: float  # of the table's total kernel time, 0..1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PhaseShares:
    phase: str
    total_ns: int
    categories: list[CategoryShare]

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "total_ns": self.total_ns, "categories": [c.to_dict() for c in self.categories]}


@dataclass(frozen=True)
class TopKernel:
    rank: int
    name: str
    category: str
    total_ns: int
    instances: int
    avg_ns: int
    share: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RangeTopKernels:
    range: str  # "" means the whole kernel table
    total_ns: int
    kernels: list[TopKernel]

    def to_dict(self) -> dict[str, Any]:
        return {"range": self.range, "total_ns": self.total_ns, "kernels": [k.to_dict() for k in self.kernels]}


@dataclass(frozen=True)
class SoftmaxVsMatmuls:
    """NVTX range time (CPU-side, what the user's `with nvtx.range` saw) and, where nvtx_kern_sum exists,
    the GPU kernel time inside each range: softmax against QK^T and attn*V."""
    scores_ns: int
    softmax_ns: int
    final_matmul_ns: int
    instances: int
    kernel_scores_ns: int | None
    kernel_softmax_ns: int | None
    kernel_final_matmul_ns: int | None

    @property
    def softmax_over_matmuls(self) -> float | None:
        both = self.scores_ns + self.final_matmul_ns
        return self.softmax_ns / both if both else None

    @property
    def kernel_softmax_over_matmuls(self) -> float | None:
        if self.kernel_softmax_ns is None or not (self.kernel_scores_ns or self.kernel_final_matmul_ns):
            return None
        return self.kernel_softmax_ns / ((self.kernel_scores_ns or 0) + (self.kernel_final_matmul_ns or 0))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "softmax_over_matmuls": self.softmax_over_matmuls,
                "kernel_softmax_over_matmuls": self.kernel_softmax_over_matmuls}


@dataclass(frozen=True)
class ForwardCheck:
    """The profiler's forward range per step against the console's own timed forward."""
    profiled_ms: float
    timed_ms: float
    steps: int
    kernel_ms: float | None  # GPU kernel time inside `forward` per step, from nvtx_kern_sum

    @property
    def rel_diff(self) -> float:
        return (self.profiled_ms - self.timed_ms) / self.timed_ms if self.timed_ms else float("inf")

    def within(self, tolerance: float = 0.10) -> bool:
        return abs(self.rel_diff) <= tolerance

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rel_diff": self.rel_diff, "within_10pct": self.within(0.10)}


def table_frame(tables: Source, name: str) -> pd.DataFrame | None:
    """The named table as a DataFrame; None when it is absent or empty (as `tables.get(name) or []`)."""
    return frames_of(tables).frame(name)


def column(frame: pd.DataFrame, name: str, default: Any = 0) -> pd.Series:
    """A column with `default` where a row has no value (a row without the key reads as the default)."""
    if name not in frame.columns:
        return pd.Series([default] * len(frame), index=frame.index, dtype=object)
    col = frame[name]
    return col.astype(object).where(col.notna(), default) if col.hasnans else col


def exact_sum(values: pd.Series) -> int | float:
    """sum() of the values as Python adds them: int64 columns at C speed while no sum can overflow."""
    arr = values.to_numpy() if values.dtype != object else None
    if arr is not None and arr.dtype.kind in "iu" and (len(arr) == 0 or np.abs(arr.astype(np.float64)).sum() < 2**62):
        return int(arr.sum())
    return sum(values.tolist())


def _range_frame(frames: TableFrames, range_name: str) -> pd.DataFrame | None:
    frame = frames.frame("nvtx_kern_sum")
    if frame is None or "range" not in frame.columns:
        return None
    part = frame[(frame["range"] == range_name).fillna(False).to_numpy(dtype=bool)]
    return part if len(part) else None


def _shares(names: pd.Series, totals: pd.Series, cats: pd.Series | None = None) -> list[CategoryShare]:
    cats = categorize_column(names.reset_index(drop=True)) if cats is None else cats.reset_index(drop=True)
    totals = totals.reset_index(drop=True)
    sums: dict[str, int | float] = {}
    arr = totals.to_numpy() if totals.dtype != object else None
    if arr is not None and arr.dtype.kind in "iu" and np.abs(arr.astype(np.float64)).sum() < 2**62:
        codes = cats.cat.codes.to_numpy()
        for code in np.unique(codes):  # a category's rows at a time: int64 sums, exact, little memory
            sums[CATEGORIES[code]] = int(arr[codes == code].sum())
    else:  # floats, or sums past int64: in row order, as Python adds them
        for cat, ns in zip(cats.tolist(), totals.tolist()):
            sums[cat] = sums.get(cat, 0) + ns
    grand = sum(sums.values())
    return [CategoryShare(c, t, t / grand if grand else 0.0) for c, t in sorted(sums.items(), key=lambda kv: (-kv[1], kv[0]))]


def category_shares(tables: Source, categories: pd.Series | None = None) -> list[CategoryShare]:
    """Kernel time per category over the whole kernel table, largest first. `categories`: the kernels'
    categories (categories.categorize_column of the table's names) where the caller has them."""
    frame = table_frame(tables, "cuda_gpu_kern_sum")
    if frame is None:
        return []
    return _shares(frame["name"], frame["total_time_ns"], categories)


def phase_shares(tables: Source, phases: tuple[str, ...] = PHASES) -> list[PhaseShares]:
    """Category shares of the kernels inside each NVTX phase (from nvtx_kern_sum); absent phases are left out.

    nvtx_kern_sum attributes a kernel to each enclosing range, so `forward` holds its layers' kernels too.
    """
    out, frames = [], frames_of(tables)
    for phase in phases:
        rows = _range_frame(frames, phase)
        if rows is not None:
            out.append(PhaseShares(phase, exact_sum(rows["total_time_ns"]), _shares(rows["name"], rows["total_time_ns"])))
    return out


def _descending(totals: pd.Series) -> np.ndarray:
    """Row positions by total, largest first, ties in table order (a stable sort)."""
    values = totals.to_numpy()
    if values.dtype == object:
        return np.array(sorted(range(len(values)), key=lambda i: -values[i]), dtype=np.int64)
    return np.argsort(-values, kind="stable")


def top_kernels(tables: Source, range_name: str | None = None, n: int = 10) -> RangeTopKernels:
    """The n kernels with most total time, over the kernel table or inside one NVTX range."""
    frames = frames_of(tables)
    if range_name is None:
        frame = frames.frame("cuda_gpu_kern_sum")
        names = frame["name"] if frame is not None else pd.Series([], dtype=object)
        totals = frame["total_time_ns"] if frame is not None else pd.Series([], dtype=np.int64)
        counts = column(frame, "instances") if frame is not None else pd.Series([], dtype=np.int64)
    else:
        rows = _range_frame(frames, range_name)
        if rows is None:
            names, totals, counts = (pd.Series([], dtype=object) for _ in range(3))
        else:  # one row per PID/TID: add them up per kernel, in the order kernels first appear
            merged = pd.DataFrame({"name": rows["name"].to_numpy(), "t": rows["total_time_ns"].to_numpy(),
                                   "k": column(rows, "kern_inst").to_numpy()})
            if merged["t"].dtype == object or merged["k"].dtype == object:  # as Python adds them
                acc: dict[Any, list[Any]] = {}
                for name, t, k in zip(merged["name"].tolist(), merged["t"].tolist(), merged["k"].tolist()):
                    a = acc.setdefault(name, [0, 0])
                    a[0] += t
                    a[1] += k
                names = pd.Series(list(acc), dtype=object)
                totals = pd.Series([a[0] for a in acc.values()], dtype=object)
                counts = pd.Series([a[1] for a in acc.values()], dtype=object)
            else:
                sums = merged.groupby("name", sort=False, dropna=False)[["t", "k"]].sum()
                names = pd.Series(sums.index.tolist(), dtype=object)
                totals, counts = sums["t"].reset_index(drop=True), sums["k"].reset_index(drop=True)
    total = exact_sum(totals.reset_index(drop=True))
    order = _descending(totals.reset_index(drop=True))[:n]
    top_names = [names.iloc[i] for i in order]
    top_t = [_py(totals.iloc[i]) for i in order]
    top_k = [_py(counts.iloc[i]) for i in order]
    kernels = [TopKernel(i + 1, name, categorize(name), t, k, round(t / k) if k else 0, t / total if total else 0.0)
               for i, (name, t, k) in enumerate(zip(top_names, top_t, top_k))]
    return RangeTopKernels(range_name or "", total, kernels)


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def top_kernels_per_range(tables: Source, ranges: tuple[str, ...] = PHASES, n: int = 5) -> list[RangeTopKernels]:
    frames = frames_of(tables)
    return [t for t in (top_kernels(frames, r, n) for r in ranges) if t.kernels]


def _nvtx_total(frames: TableFrames, range_name: str) -> tuple[int, int]:
    frame = frames.frame("nvtx_sum")
    if frame is None:
        frame = frames.frame("nvtx_pushpop_sum")
    if frame is None or "range" not in frame.columns:
        return 0, 0
    rows = frame[(frame["range"] == range_name).fillna(False).to_numpy(dtype=bool)]
    return exact_sum(rows["total_time_ns"]), exact_sum(column(rows, "instances"))


def softmax_vs_matmuls(tables: Source, ranges: tuple[str, str, str] = ATTENTION_RANGES) -> SoftmaxVsMatmuls | None:
    """Softmax against the two attention matmuls, from the model's NVTX ranges; None without them."""
    frames = frames_of(tables)
    (scores, n), (softmax, _), (final, _) = (_nvtx_total(frames, r) for r in ranges)
    if not (scores or softmax or final):
        return None
    kern = [_range_total(frames, name) if frames.has("nvtx_kern_sum") else None for name in ranges]
    return SoftmaxVsMatmuls(scores, softmax, final, n, *kern)


def _range_total(frames: TableFrames, range_name: str) -> int:
    rows = _range_frame(frames, range_name)
    return exact_sum(rows["total_time_ns"]) if rows is not None else 0


def forward_check(tables: Source, timed_forward_ms: float, steps: int | None = None,
                  range_name: str = "forward") -> ForwardCheck | None:
    """nsys's forward per step vs. a timed forward (ms); per step = range total / instances unless `steps`."""
    frames = frames_of(tables)
    total, instances = _nvtx_total(frames, range_name)
    n = steps or instances
    if not total or not n:
        return None
    kern_rows = _range_frame(frames, range_name)
    kernel_ms = exact_sum(kern_rows["total_time_ns"]) / n / 1e6 if kern_rows is not None else None
    return ForwardCheck(total / n / 1e6, timed_forward_ms, n, kernel_ms)


def row_units(profiler: str | None, device: str, tables: Source) -> str:
    """What a profile's kernel rows are: GPU kernels (nsys, torch on CUDA), or CPU ops (by self time), which
    the torch profiler records on a CPU run and an imported CPU-only trace holds (`mostly_aten`)."""
    if profiler is None:
        return "kernels"
    if profiler == "torch":
        return "CPU ops" if device == "cpu" else "kernels"
    return "CPU ops" if profiler == "import" and mostly_aten(tables) else "kernels"


def mostly_aten(tables: Source) -> bool:
    """Most of the kernel table's time in `aten::` ops, a name no GPU kernel has: CPU ops, not kernels."""
    frame = table_frame(tables, "cuda_gpu_kern_sum")
    if frame is None or "total_time_ns" not in frame.columns:
        return False
    totals = column(frame, "total_time_ns")  # a missing total counts 0, as `r.get(...) or 0` did
    names = column(frame, "name", "")
    names = names if names.dtype == "str" else names.astype(str)
    whole = exact_sum(totals)
    aten = exact_sum(totals[names.str.startswith("aten::").to_numpy(dtype=bool)])
    return bool(whole) and aten > whole / 2

"""Name -> category for GPU kernels (nsys, nvprof, torch.profiler) and CPU ops (torch.profiler on CPU).

Rules are ordered: the first that matches wins. Order matters where names overlap: NCCL's
`ReduceScatter` is communication not reduction, cuBLAS's `splitKreduce` is part of a matmul,
`cutlass::device_kernel<flash::...>` is attention not matmul, `softmax` beats generic elementwise.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

CATEGORIES = ("matmul", "attention", "softmax", "normalization", "elementwise", "reduction", "optimizer",
              "memory", "communication", "other")

# CPU ops as torch.profiler names them; aten names are exact, so a table beats patterns here.
_ATEN = {
    "matmul": "mm addmm bmm baddbmm matmul linear einsum addmv mv dot _addmm_activation",
    "attention": "scaled_dot_product_attention _scaled_dot_product_flash_attention_for_cpu "
                 "_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
                 "_scaled_dot_product_cudnn_attention _flash_attention_forward _efficient_attention_forward",
    "softmax": "softmax _softmax log_softmax _log_softmax _softmax_backward_data _log_softmax_backward_data",
    "normalization": "layer_norm native_layer_norm native_layer_norm_backward rms_norm _fused_rms_norm "
                     "batch_norm group_norm",
    "reduction": "sum mean max min amax amin argmax argmin norm linalg_vector_norm var std logsumexp cumsum",
    "memory": "copy_ fill_ zero_ zeros zeros_like empty empty_like to _to_copy clone contiguous cat stack "
              "index_select embedding embedding_backward gather scatter_ slice view reshape transpose t permute "
              "expand narrow select unsqueeze squeeze flatten as_strided split chunk resize_ ones ones_like "
              "full arange detach _unsafe_view",
    "elementwise": "mul add sub div pow rsqrt sqrt exp log silu gelu relu sigmoid tanh neg where masked_fill "
                   "triu tril cos sin abs clamp mul_ add_ sub_ div_ addcmul_ addcdiv_ lerp_ sqrt_ "
                   "silu_backward gelu_backward threshold_backward sigmoid_backward dropout cross_entropy_loss "
                   "nll_loss nll_loss_backward rsub reciprocal",
}
_ATEN_MAP = {op: cat for cat, ops in _ATEN.items() for op in ops.split()}

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((cat, re.compile(rx, re.I)) for cat, rx in (
    ("communication", r"nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|c10d::"),
    ("memory", r"^\[CUDA mem|memcpy|memset|reshape_and_cache"),
    ("optimizer", r"multi_tensor_apply|adam|sgd_|optimizer\.step|_foreach_|unscale|loss_?scaling|"
                  r"non_finite|clip_grad"),
    ("attention", r"flash|fmha|attention|mem_?eff|efficient_attention|dot_do_o|convert_dq|sdpa"),
    ("softmax", r"softmax"),
    ("normalization", r"layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm|rowwisemoments|"
                      r"gammabeta|cuComputeGrad|cuApplyLayerNorm"),
    ("matmul", r"gemm|gemv|nvjet|cublas|xmma|matmul|splitk|triton_\w*?_?(?:mm|bmm|addmm)(?:_|\b)|"
               r"^triton_mm|cutlass.*(?:tensorop|simt|wmma)"),
    ("reduction", r"reduc|argmax|argmin|prefixsum|scan|welford|\bsum_|triton_(?:red|per)_"),
    ("memory", r"copy|\bfill|fillfunctor|gather|scatter|index_?select|lookuptable|indexselect|transpose|"
               r"concatenate|catarray|dynamic_slice|wrapped_slice"),
    ("elementwise", r"elementwise|elemwise|functor|triton_poi_|pointwise|vectorized|unrolled|eigenmeta|"
                    r"activation|rotary|dropout|cast|convert|broadcast|^(?:loop_|wrapped_)|"
                    r"^(?:add|multiply|subtract|divide|exponential|log|convert|broadcast|negate|select)_\d+$"),
))


_HEAD = re.compile(r"[<(]")
_GENERIC_LAUNCHER = re.compile(r"(?:device_kernel|::Kernel2?|^void Kernel2?)$")


@lru_cache(maxsize=65536)
def categorize(kernel_name: str) -> str:
    """The category of one kernel or op name; `other` when no rule fits."""
    name = kernel_name.strip()
    if name.startswith("aten::"):
        op = name[6:].split(".", 1)[0]
        if op.startswith("_foreach_") or op.startswith("_fused_adam") or op.startswith("_fused_sgd"):
            return "optimizer"
        return _ATEN_MAP.get(op, "other")
    head = _HEAD.split(name, 1)[0]
    if _GENERIC_LAUNCHER.search(head):
        head = name  # cutlass::device_kernel<...Gemm...>: the template argument says what runs
    for category, pattern in _RULES:
        # Template arguments mention Gemm in MoE helpers that are no matmul: judge matmul on the name itself.
        if pattern.search(head if category == "matmul" else name):
            return category
    return "other"


# --- analyses over the tables dict (derived on demand, never stored) ---------------------------------

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


def _kernel_rows(tables: Mapping[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return tables.get("cuda_gpu_kern_sum") or []


def _shares(pairs: list[tuple[str, int]]) -> list[CategoryShare]:
    totals: dict[str, int] = {}
    for name, ns in pairs:
        cat = categorize(name)
        totals[cat] = totals.get(cat, 0) + ns
    grand = sum(totals.values())
    return [CategoryShare(c, t, t / grand if grand else 0.0)
            for c, t in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))]


def category_shares(tables: Mapping[str, list[dict[str, Any]]]) -> list[CategoryShare]:
    """Kernel time per category over the whole kernel table, largest first."""
    return _shares([(r["name"], r["total_time_ns"]) for r in _kernel_rows(tables)])


def _range_rows(tables: Mapping[str, list[dict[str, Any]]], range_name: str) -> list[dict[str, Any]]:
    return [r for r in tables.get("nvtx_kern_sum") or [] if r.get("range") == range_name]


def phase_shares(tables: Mapping[str, list[dict[str, Any]]], phases: tuple[str, ...] = PHASES) -> list[PhaseShares]:
    """Category shares of the kernels inside each NVTX phase (from nvtx_kern_sum); absent phases are left out.

    nvtx_kern_sum attributes a kernel to each enclosing range, so `forward` holds its layers' kernels too.
    """
    out = []
    for phase in phases:
        rows = _range_rows(tables, phase)
        if rows:
            pairs = [(r["name"], r["total_time_ns"]) for r in rows]
            out.append(PhaseShares(phase, sum(ns for _, ns in pairs), _shares(pairs)))
    return out


def top_kernels(tables: Mapping[str, list[dict[str, Any]]], range_name: str | None = None,
                n: int = 10) -> RangeTopKernels:
    """The n kernels with most total time, over the kernel table or inside one NVTX range."""
    if range_name is None:
        rows = [(r["name"], r["total_time_ns"], r.get("instances", 0)) for r in _kernel_rows(tables)]
    else:
        merged: dict[str, list[int]] = {}
        for r in _range_rows(tables, range_name):  # one row per PID/TID: add them up per kernel
            acc = merged.setdefault(r["name"], [0, 0])
            acc[0] += r["total_time_ns"]
            acc[1] += r.get("kern_inst", 0)
        rows = [(name, t, k) for name, (t, k) in merged.items()]
    total = sum(t for _, t, _ in rows)
    rows.sort(key=lambda x: -x[1])
    kernels = [TopKernel(i + 1, name, categorize(name), t, k, round(t / k) if k else 0, t / total if total else 0.0)
               for i, (name, t, k) in enumerate(rows[:n])]
    return RangeTopKernels(range_name or "", total, kernels)


def top_kernels_per_range(tables: Mapping[str, list[dict[str, Any]]], ranges: tuple[str, ...] = PHASES,
                          n: int = 5) -> list[RangeTopKernels]:
    return [t for t in (top_kernels(tables, r, n) for r in ranges) if t.kernels]


def _nvtx_total(tables: Mapping[str, list[dict[str, Any]]], range_name: str) -> tuple[int, int]:
    rows = [r for r in (tables.get("nvtx_sum") or tables.get("nvtx_pushpop_sum") or [])
            if r.get("range") == range_name]
    return sum(r["total_time_ns"] for r in rows), sum(r.get("instances", 0) for r in rows)


def softmax_vs_matmuls(tables: Mapping[str, list[dict[str, Any]]],
                       ranges: tuple[str, str, str] = ATTENTION_RANGES) -> SoftmaxVsMatmuls | None:
    """Softmax against the two attention matmuls, from the model's NVTX ranges; None without them."""
    (scores, n), (softmax, _), (final, _) = (_nvtx_total(tables, r) for r in ranges)
    if not (scores or softmax or final):
        return None
    kern = [sum(r["total_time_ns"] for r in _range_rows(tables, name)) if tables.get("nvtx_kern_sum") else None
            for name in ranges]
    return SoftmaxVsMatmuls(scores, softmax, final, n, *kern)


def forward_check(tables: Mapping[str, list[dict[str, Any]]], timed_forward_ms: float,
                  steps: int | None = None, range_name: str = "forward") -> ForwardCheck | None:
    """nsys's forward per step vs. a timed forward (ms); per step = range total / instances unless `steps`."""
    total, instances = _nvtx_total(tables, range_name)
    n = steps or instances
    if not total or not n:
        return None
    kern_rows = _range_rows(tables, range_name)
    kernel_ms = sum(r["total_time_ns"] for r in kern_rows) / n / 1e6 if kern_rows else None
    return ForwardCheck(total / n / 1e6, timed_forward_ms, n, kernel_ms)

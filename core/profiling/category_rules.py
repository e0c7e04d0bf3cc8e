"""Name -> category for GPU kernels (nsys, nvprof, torch.profiler) and CPU ops (torch.profiler on CPU): the rules.

Rules are ordered: the first that matches wins. Order matters where names overlap: NCCL's
`ReduceScatter` is communication not reduction, cuBLAS's `splitKreduce` is part of a matmul,
`cutlass::device_kernel<flash::...>` is attention not matmul, `softmax` beats generic elementwise.
"""
from __future__ import annotations

import re
from functools import lru_cache

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

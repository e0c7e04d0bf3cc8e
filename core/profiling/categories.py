"""Kernel and op categories: the rules that name one kernel's category (`categorize`), and the category of every
name in a table's column at once (`categorize_column`) without running the rules once per row.

Name -> category for GPU kernels (nsys, nvprof, torch.profiler) and CPU ops (torch.profiler on CPU). Rules are
ordered: the first that matches wins. Order matters where names overlap: NCCL's `ReduceScatter` is communication
not reduction, cuBLAS's `splitKreduce` is part of a matmul, `cutlass::device_kernel<flash::...>` is attention not
matmul, `softmax` beats generic elementwise.

A column: each distinct name is categorised once. A summary's names are distinct by definition, but a million
of them differ mostly in their numbers (tile shapes, template arguments, `triton_poi_fused_add_17`), so
names are first reduced to a skeleton: every run of ASCII digits becomes `0`, except the runs the rules
spell out themselves (`10` of `c10d::`, `2` of `Kernel2`), which stay. No rule tells two skeletons of
one name apart: their digit-reading parts (`\\d+`, `\\w*?`, `.*`) all repeat, and `\\b` sees a digit
either way. `aten::` names are looked up as they are (CPU-op tables are small). The skeletons are made
with numpy over pyarrow's string buffers, a block of rows at a time, where the names are arrow-backed;
with Python's `re` otherwise (pandas, numpy and pyarrow load on first use: importing this module for
`categorize` costs none of them). tests/core/profiling/test_categories_column.py holds the column to `categorize`.
"""
from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from perfconsole.core.profiling.lazy_imports import HAS_ARROW, LazyModule, numpy as np, pandas as pd

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


# --- a whole column at once -------------------------------------------------------------------------------------

pa, pc = LazyModule("pyarrow"), LazyModule("pyarrow.compute")

SMALL = 20_000  # fewer rows than this: categorise the distinct names themselves
# Digit runs the rules (and the launcher test) spell out; a run equal to one of them is kept.
KEPT_RUNS = frozenset(run for p in (*(r for _, r in _RULES), _GENERIC_LAUNCHER)
                      for run in re.findall(r"(?<![\\\d{,])\d+", p.pattern))
_RUNS = re.compile(r"[0-9]+")


@functools.cache
def category_dtype() -> pd.CategoricalDtype:
    return pd.CategoricalDtype(list(CATEGORIES))


def skeleton(name: str) -> str:
    return _RUNS.sub(lambda m: m.group(0) if m.group(0) in KEPT_RUNS else "0" * len(m.group(0)), name)


def categorize_column(names: pd.Series) -> pd.Series:
    """categorize() of every name, as a categorical Series on the same index."""
    n = len(names)
    if n == 0:
        return _as_series(np.zeros(0, dtype=np.int8), names.index)
    arrow = getattr(names.array, "__arrow_array__", None)
    if n >= SMALL and HAS_ARROW and arrow is not None:
        out = _arrow_codes(arrow())
    else:
        values = names.astype(object).where(names.notna(), "").tolist()
        if n >= SMALL:
            values = [skeleton(v) for v in values]
        codes, uniques = pd.factorize(pd.Series(values, dtype=object), sort=False)
        aten = [n >= SMALL and u.strip().startswith("aten::") for u in uniques]
        cats = np.array([_CODE[categorize(u)] if not a else -1 for u, a in zip(uniques, aten)], dtype=np.int8)
        out = cats[codes]
    if n >= SMALL and (out < 0).any():  # op names are looked up whole: categorise those rows on their own names
        rows = np.flatnonzero(out < 0)
        out[rows] = [_CODE[categorize(v if isinstance(v, str) else "")] for v in names.iloc[rows].tolist()]
    return _as_series(out, names.index)


_CODE = {c: i for i, c in enumerate(CATEGORIES)}


def _as_series(codes: np.ndarray, index: pd.Index) -> pd.Series:
    return pd.Series(pd.Categorical.from_codes(codes, dtype=category_dtype()), index=index)


def _arrow_codes(arr: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Category codes (-1: an `aten::` name, looked up whole by the caller), a block of skeletons at a
    time, two blocks at once (numpy and pyarrow let go of the interpreter while they work)."""
    out = np.empty(len(arr), dtype=np.int8)
    known: dict[str, int] = {}  # skeleton -> category code
    at = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for size, uniques, index in _two_at_a_time(pool, _blocks(arr)):
            if len(uniques) > MANY:  # names that differ in letters: the rules through pyarrow's RE2
                codes = rule_codes(uniques)
                rest = np.flatnonzero(codes == _PYTHON)
                codes[rest] = [_code_of(u) for u in uniques.take(pa.array(rest)).to_pylist()]
            else:
                codes = np.array([known[u] if u in known else known.setdefault(u, _code_of(u))
                                  for u in uniques.to_pylist()], dtype=np.int8)
            out[at:at + size] = codes[index]
            at += size
    return out


def _two_at_a_time(pool: ThreadPoolExecutor, blocks: Iterator[pa.Array]) -> Iterator[tuple[int, pa.Array, np.ndarray]]:
    """_distinct_skeletons of each block, the next one under way while this one is used (pool.map would
    start them all and hold every block's result: the names' size again when they are all distinct)."""
    pending: deque = deque()
    for block in blocks:
        pending.append(pool.submit(_distinct_skeletons, block))
        if len(pending) == 2:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


MANY = 2_048  # distinct skeletons in a block past which the rules run over them all at once
_PYTHON = -2  # rule_codes: a name RE2 may read otherwise than Python's re; categorize() decides
# printable ASCII without a space at either end (no strip() to do, no Unicode \w, \b or case folding)
_RE2_SAFE = r"^[!-~](?:[ -~]*[!-~])?$"


def rule_codes(names: pa.Array) -> np.ndarray:
    """categorize() of each name, the rules run by pyarrow (RE2) once per rule over the names no rule
    has placed yet, as categorize() tries them in turn. RE2 and Python's re agree on these patterns for
    printable ASCII: other names (and `aten::` ops, looked up whole) get _PYTHON."""
    out = np.full(len(names), _PYTHON, dtype=np.int8)
    safe = pc.and_(pc.match_substring_regex(names, _RE2_SAFE), pc.invert(pc.starts_with(names, "aten::")))
    idx = np.flatnonzero(safe.to_numpy(zero_copy_only=False))
    if not len(idx):
        return out
    sub = names.take(pa.array(idx))
    head = pc.replace_substring_regex(sub, r"[<(].*", "")  # the name up to its first < or (
    launcher = pc.match_substring_regex(head, _GENERIC_LAUNCHER.pattern)
    matmul_on = pc.if_else(launcher, sub, head)  # cutlass::device_kernel<...Gemm...>: the template says
    codes = np.full(len(idx), _CODE["other"], dtype=np.int8)
    left = np.arange(len(idx))
    for category, pattern in _RULES:
        if not len(left):
            break
        target = (matmul_on if category == "matmul" else sub).take(pa.array(left))
        hit = pc.match_substring_regex(target, pattern.pattern, ignore_case=True).to_numpy(zero_copy_only=False)
        codes[left[hit]] = _CODE[category]
        left = left[~hit]
    out[idx] = codes
    return out


def _distinct_skeletons(chunk: pa.Array) -> tuple[int, pa.Array, np.ndarray]:
    """(rows, the distinct skeletons of a block, each row's position among them)."""
    chunk = chunk.cast(pa.large_string()) if chunk.type != pa.large_string() else chunk
    if chunk.null_count:
        chunk = pc.fill_null(chunk, "")
    keys = _chunk_skeleton(chunk)
    uniques = pc.unique(keys)
    return len(chunk), uniques, pc.index_in(keys, value_set=uniques).to_numpy()


def _blocks(arr: pa.ChunkedArray | pa.Array, rows: int = 1 << 14) -> Iterator[pa.Array]:
    """The column's chunks, small ones joined up to about `rows` rows (few numpy calls per row), one at
    a time (a copy of the whole column would be the names' size again)."""
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    group, n = [], 0
    for chunk in chunks:
        if len(chunk) >= rows // 4 and not group:
            yield chunk
            continue
        group.append(chunk)
        n += len(chunk)
        if n >= rows:
            yield pa.concat_arrays(group) if len(group) > 1 else group[0]
            group, n = [], 0
    if group:
        yield pa.concat_arrays(group) if len(group) > 1 else group[0]


def _code_of(key: str) -> int:
    return -1 if key.strip().startswith("aten::") else _CODE[categorize(key)]


def _chunk_skeleton(chunk: pa.LargeStringArray) -> pa.LargeStringArray:
    """skeleton() of every string of one chunk, on its bytes (the offsets stay: no byte moves)."""
    if len(chunk) == 0:
        return chunk
    offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[chunk.offset:chunk.offset + len(chunk) + 1]
    base = int(offsets[0])
    data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[base:int(offsets[-1])]
    offsets = offsets - base
    digit = (data - np.uint8(48)) < np.uint8(10)
    where = np.flatnonzero(digit)
    if not len(where):
        return chunk
    out = data.copy()
    out[where] = ord("0")
    # then the runs the rules spell, put back whole: a run begins where the byte before is no digit of
    # the same string, and ends where the byte after is none
    n = len(data)
    starts = None
    for run in KEPT_RUNS:
        raw = run.encode()
        k = len(raw)
        at = where[data[where] == raw[0]]
        at = at[at + k <= n]
        for j, ch in enumerate(raw[1:], 1):
            at = at[data[at + j] == ch]
        if not len(at):
            continue
        if starts is None:
            starts = np.zeros(n + 1, dtype=bool)
            starts[offsets] = True  # string boundaries
        end = at + k
        whole = (starts[at] | ~digit[np.maximum(at - 1, 0)]) & (starts[end] | ~digit[np.minimum(end, n - 1)])
        for j in range(1, k):
            whole &= ~starts[at + j]  # within one string
        at = at[whole]
        for j, ch in enumerate(raw):
            out[at + j] = ch
    return pa.Array.from_buffers(pa.large_string(), len(chunk), [None, pa.py_buffer(offsets), pa.py_buffer(out)])
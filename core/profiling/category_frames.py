"""The category of every name in a column, as `categorize` gives it, without running the rules once
per row on a million-row table.

Each distinct name is categorised once. A summary's names are distinct by definition, but a million
of them differ mostly in their numbers (tile shapes, template arguments, `triton_poi_fused_add_17`), so
names are first reduced to a skeleton: every run of ASCII digits becomes `0`, except the runs the rules
spell out themselves (`10` of `c10d::`, `2` of `Kernel2`), which stay. No rule tells two skeletons of
one name apart: their digit-reading parts (`\\d+`, `\\w*?`, `.*`) all repeat, and `\\b` sees a digit
either way. `aten::` names are looked up as they are (CPU-op tables are small). The skeletons are made
with numpy over pyarrow's string buffers, a block of rows at a time, where the names are arrow-backed;
with Python's `re` otherwise. tests/core/profiling/test_category_frames.py holds them to `categorize`.
"""
from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from perfconsole.core.profiling.lazy_imports import HAS_ARROW, LazyModule, numpy as np, pandas as pd
from perfconsole.core.profiling.category_rules import _GENERIC_LAUNCHER, _RULES, CATEGORIES, categorize

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

"""One `nsys stats` CSV table into the normalised DataFrame, at the speed of a CSV library.

pyarrow's CSV reader where pyarrow is installed (the reader `pandas.read_csv(engine="pyarrow")` drives,
used here block by block: pandas' own call reads the whole file before converting it and peaked at
560-710 MB on a 174 MB, million-row kernel table), `pandas.read_csv` with its C parser otherwise.

The result must be what the row-wise reader (columns.make_rows) makes of the same lines, value for
value, or nothing: every column is read with the type its header says (names as text even when they
look like numbers), and whatever the library reads differently from Python's `int()`/`float()` and
the csv module (a missing or extra field, an empty or non-numeric cell, a value past int64, inf or nan,
a quoted name running over a line end) makes `read_table` return None. The caller then reads the
table row by row, which names the file and line of the bad cell as before.
"""
from __future__ import annotations

import ctypes
import io
from collections.abc import Sequence
from typing import IO

import numpy as np
import pandas as pd

from perfconsole.core.profiling.columns import finish_rows, normalise_column

try:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv
except ImportError:  # pandas' C parser does the reading
    pa = pc = pa_csv = None
else:
    # pyarrow's default allocator (mimalloc) keeps what a table's conversion freed; the system's gives it
    # back, which kept a million-row import 40-60 MB lower at its peak
    pa.set_memory_pool(pa.system_memory_pool())

ENGINES = ("pyarrow", "c") if pa is not None else ("c",)
ENGINE = ENGINES[0]  # the one read_table uses (tests run both)
INT_COLUMNS = {"instances", "num_calls", "count", "pid", "tid", "nvtx_inst", "kern_inst"}
_TWO63 = 2.0 ** 63
_INT64_MIN = -(2**63)  # int64's floor; the row-wise reader refuses it (it allows down to -INT64_MAX)
_BLOCK = 1 << 20
_THREADS = False
# pandas 3.1 reads every float with one correctly rounded converter and deprecates choosing; before, the
# round-trip one is what agrees with float()
_PRECISE = {} if tuple(int(x) for x in pd.__version__.split(".")[:2]) >= (3, 1) else {"float_precision": "round_trip"}
NVTX_REPORTS = ("nvtx_sum", "nvtx_pushpop_sum", "nvtx_kern_sum")
MEMOP_REPORTS = ("cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum")


def _kinds(headers: Sequence[str]) -> list[tuple[str, str, float | int]] | None:
    """(name, kind, factor) per header cell; None when two cells normalise to one name."""
    out = []
    for h in headers:
        name, factor = normalise_column(h)
        if name.endswith("_ns"):
            kind = "ns"
        elif name.endswith("_mb"):
            kind = "mb"
        elif name.endswith("_pct"):
            kind = "pct"
        elif name in INT_COLUMNS:
            kind = "int"
        else:
            kind = "text"  # the row-wise reader keeps any other column as its text
        out.append((name, kind, factor or 1))
    names = [n for n, _, _ in out]
    return out if len(set(names)) == len(names) else None


def read_table(source: IO[bytes] | bytes, headers: Sequence[str], report: str, expect_rows: int | None,
               engine: str | None = None) -> pd.DataFrame | None:
    """The rows below the header line `source` starts with, typed and normalised; None where the
    row-wise reader must decide (see the module's docstring). `expect_rows`: the lines after the header."""
    kinds = _kinds(headers)
    if kinds is None:
        return None
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(source)
    engine = engine or ENGINE
    try:
        columns = _read_arrow(source, kinds) if engine == "pyarrow" else _read_c(source, kinds)
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError, pd.errors.ParserError):
        return None
    except Exception as exc:  # pyarrow's own errors (ArrowInvalid, ...) derive from them or from Exception
        if pa is not None and isinstance(exc, pa.ArrowException):
            return None
        raise
    if columns is None:
        return None
    n = len(columns[0]) if columns else 0
    if expect_rows is not None and n != expect_rows:
        return None  # a quoted field ran over a line end: the csv module would join the lines
    if n and any("\n" in str(col.iloc[-1]) for col, (_, kind, _) in zip(columns, kinds) if kind == "text"):
        return None  # a quote left open on the last line: the csv module keeps no line end in the field
    return finish_frame(report, pd.DataFrame(dict(zip([k[0] for k in kinds], columns)), copy=False))


def _read_arrow(source: IO[bytes], kinds: list[tuple[str, str, float | int]]) -> list[pd.Series] | None:
    names = [f"c{j}" for j in range(len(kinds))]
    types = {}
    for col, (_, kind, _) in zip(names, kinds):
        if kind == "text":
            types[col] = pa.large_string()
        elif kind in ("mb", "pct"):
            types[col] = pa.float64()
        elif kind == "int":
            types[col] = pa.int64()
    reader = pa_csv.open_csv(
        source,
        read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1, block_size=_BLOCK),
        parse_options=pa_csv.ParseOptions(newlines_in_values=False, ignore_empty_lines=True),
        convert_options=pa_csv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False,
                                              quoted_strings_can_be_null=False, true_values=["\0"],
                                              false_values=["\0\0"], timestamp_parsers=["\0"]),
        memory_pool=pa.system_memory_pool())
    table = reader.read_all()
    del reader
    columns = [table.column(j) for j in range(table.num_columns)]
    del table
    _trim()
    out = []
    for j, (_, kind, factor) in enumerate(kinds):
        col, columns[j] = columns[j], None  # each column's arrow buffers go as soon as it is converted
        if col.null_count:
            return None
        if kind == "text":
            out.append(pd.Series(col, dtype="str"))
            continue
        col = _arrow_number(col, kind, factor)
        if col is None:
            return None
        out.append(pd.Series(pd.arrays.ArrowExtensionArray(col)))  # no copy: the console makes them numpy
    return out


def _trim() -> None:
    """Hand the reader's freed blocks back to the system (glibc keeps them in its arenas otherwise, and
    what follows the read would add to them rather than reuse them)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def _arrow_number(col: pa.ChunkedArray, kind: str, factor: float | int) -> pa.ChunkedArray | None:
    if kind == "int":
        return col if _min_ok(col) else None
    if kind in ("mb", "pct"):
        if factor != 1:
            col = pc.multiply(col, float(factor))
        return col if _finite(col) else None
    # ns: integers stay exact; a decimal (Avg, Med, StdDev) or a unit other than ns goes through float
    if pa.types.is_integer(col.type) and factor == 1:
        return col.cast(pa.int64()) if col.type == pa.int64() and _min_ok(col) else None
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        return None
    col = col.cast(pa.float64())
    if factor != 1:
        col = pc.multiply(col, float(factor))
    if not _finite(col):
        return None
    col = pc.round(col, round_mode="half_to_even")
    if len(col) and (pc.max(col).as_py() >= _TWO63 or pc.min(col).as_py() <= -_TWO63):
        return None
    return col.cast(pa.int64())


def _finite(col: pa.ChunkedArray) -> bool:
    return len(col) == 0 or pc.all(pc.is_finite(col)).as_py()


def _min_ok(col: pa.ChunkedArray) -> bool:
    return len(col) == 0 or pc.min(col).as_py() > _INT64_MIN


def _read_c(source: IO[bytes], kinds: list[tuple[str, str, float | int]]) -> list[pd.Series] | None:
    names = [f"c{j}" for j in range(len(kinds))]
    dtypes = {c: (str if kind == "text" else "float64" if kind in ("mb", "pct") else "int64" if kind == "int"
                  else None) for c, (_, kind, _) in zip(names, kinds)}
    frame = pd.read_csv(source, engine="c", header=None, skiprows=1, names=names,
                        dtype={c: t for c, t in dtypes.items() if t is not None}, na_filter=False,
                        skip_blank_lines=True, on_bad_lines="error", **_PRECISE,
                        encoding="utf-8", encoding_errors="strict")
    out = []
    for c, (_, kind, factor) in zip(names, kinds):
        col = frame[c]
        if col.isna().any():
            return None  # a missing field
        if kind == "text":
            out.append(col.astype("str"))
            continue
        values = col.to_numpy()
        if values.dtype == np.int64 and (kind == "int" or (kind == "ns" and factor == 1)):
            if len(values) and values.min() <= _INT64_MIN:
                return None
            out.append(pd.Series(values))
            continue
        if kind == "int" or values.dtype.kind not in "if":
            return None
        values = values.astype(np.float64)
        if factor != 1:
            values = values * float(factor)
        if not np.isfinite(values).all():
            return None
        if kind == "ns":
            values = np.rint(values)
            if len(values) and (values.max() >= _TWO63 or values.min() <= -_TWO63):
                return None
            values = values.astype(np.int64)
        out.append(pd.Series(values))
    return out


def finish_frame(report: str, frame: pd.DataFrame) -> pd.DataFrame:
    """finish_rows on a frame: NVTX labels split into domain and range (both last, in that order),
    memory operations spelled one way."""
    if report in NVTX_REPORTS and "range" in frame.columns:
        label = frame.pop("range")
        domain, rng = split_ranges(label)
        frame["domain"] = domain
        frame["range"] = rng
    elif report in MEMOP_REPORTS and "operation" in frame.columns:
        # a handful of rows: the row-wise spelling itself, so both readers agree to the character
        ops = [r["operation"] for r in finish_rows(report, [{"operation": v} for v in frame["operation"].tolist()])]
        frame["operation"] = pd.Series(ops, dtype="str", index=frame.index)
    return frame


def split_ranges(label: pd.Series) -> tuple[pd.Series, pd.Series]:
    """`Domain:range` -> (domain, range) at the first colon, as columns.split_range does per label."""
    label = label.astype("str")
    parts = label.str.partition(":")
    has = (parts[1] == ":").to_numpy()
    domain = parts[0].where(has, "")
    rng = parts[2].where(has, label)
    return domain.astype("str"), rng.astype("str")


def snake(header: str) -> str:
    return normalise_column(header)[0]

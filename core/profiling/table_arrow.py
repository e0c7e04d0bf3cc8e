"""A block of a table's rows as json.dumps(indent=...) writes them, assembled by pyarrow in C.

table_json formats rows with one Python format string per row; for a million rows that was most of
`import --json`. Here each column becomes the text json would write for each of its values, as an
arrow string column, and the rows are joined from those columns and the layout's literal pieces in one
call. A column this cannot write to the byte as json does leaves the block to table_json's own way:
anything but int64, float64, bool and str without missing values; a string that json escapes (a quote,
a backslash, a control or non-ASCII character); a float is written by pyarrow where both write its
digits positionally (json's `27.0` is pyarrow's `27` with `.0`), by json itself otherwise (`1e-05`, `1e+16`,
and pyarrow's `1e+10` for json's `10000000000.0`).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ImportError:
    pa = pc = None


def rows_text(frame: pd.DataFrame, item: str, field: str) -> str | None:
    """The rows of `frame` joined by `,\\n<item>`, each an object with its keys at `field`; None when a
    column is one this cannot write."""
    if pa is None:
        return None
    pieces: list = []
    for j, name in enumerate(frame.columns):
        text = _column(frame.iloc[:, j])
        if text is None:
            return None
        lead = "{\n" if j == 0 else ",\n"
        pieces += [_lit(lead + field + json.dumps(str(name)) + ": "), text.cast(pa.large_string())]
    sep = ",\n" + item
    pieces.append(_lit("\n" + item + "}" + sep))  # each row with the separator after it, the last's cut below
    rows = pc.binary_join_element_wise(*pieces, _lit(""))
    offsets = np.frombuffer(rows.buffers()[1], dtype=np.int64)[rows.offset:rows.offset + len(rows) + 1]
    data = rows.buffers()[2]
    return data[int(offsets[0]):int(offsets[-1]) - len(sep)].to_pybytes().decode("ascii")


def _lit(text: str) -> pa.Scalar:
    return pa.scalar(text, type=pa.large_string())


def _column(col: pd.Series) -> pa.Array | None:
    kind = col.dtype.kind if not isinstance(col.dtype, pd.ArrowDtype) else col.dtype.numpy_dtype.kind
    if col.hasnans:
        return None
    if kind in "iu":
        return pc.cast(pa.array(col.to_numpy(dtype=np.int64)), pa.string())
    if kind == "b":
        return pc.if_else(pa.array(col.to_numpy(dtype=bool)), "true", "false")
    if kind == "f":
        return _floats(col.to_numpy(dtype=np.float64))
    if col.dtype == "str" or isinstance(col.dtype, pd.ArrowDtype):
        arrow = getattr(col.array, "__arrow_array__", None)
        if arrow is None:
            return None
        data = arrow()
        data = data.combine_chunks() if isinstance(data, pa.ChunkedArray) else data
        if not pa.types.is_string(data.type) and not pa.types.is_large_string(data.type):
            return None
        if not _plain(data):
            return None
        return pc.binary_join_element_wise(_lit('"'), data.cast(pa.large_string()), _lit('"'), _lit(""))
    return None


def _plain(data: pa.Array) -> bool:
    """No byte json would escape: only printable ASCII, no quote, no backslash."""
    if len(data) == 0:
        return True
    offsets = np.frombuffer(data.buffers()[1], dtype=np.int64 if pa.types.is_large_string(data.type) else np.int32)
    offsets = offsets[data.offset:data.offset + len(data) + 1]
    raw = np.frombuffer(data.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    bad = (raw < 0x20) | (raw > 0x7E) | (raw == 0x22) | (raw == 0x5C)
    return not bad.any()


def _floats(values: np.ndarray) -> pa.Array | None:
    if not np.isfinite(values).all():
        return None  # json writes NaN and Infinity, pyarrow otherwise: rare, left to Python
    text = pc.cast(pa.array(values), pa.string()).cast(pa.large_string())
    size = np.abs(values)
    # json writes 1e-4 <= |v| < 1e16 positionally (27.0); pyarrow writes the same digits, without the
    # ".0" of a whole number, and sometimes in exponent form (1e+10): those, and json's own exponent
    # forms, json writes itself
    positional = ((values == 0) | ((size >= 1e-4) & (size < 1e16))) & ~_has_e(text)
    whole = positional & (values == np.floor(values))
    text = pc.if_else(pa.array(whole), pc.binary_join_element_wise(text, _lit(".0"), _lit("")), text)
    other = np.flatnonzero(~positional)
    if len(other):
        mask = np.zeros(len(values), dtype=bool)
        mask[other] = True
        fixed_text = pa.array([json.dumps(v) for v in values[other].tolist()], type=pa.large_string())
        text = pc.replace_with_mask(text, pa.array(mask), fixed_text)
    return text


def _has_e(text: pa.Array) -> np.ndarray:
    return pc.match_substring(text, "e").to_numpy(zero_copy_only=False)

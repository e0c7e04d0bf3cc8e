"""Report names, column normalisation and value conversion shared by every profile parser.

Every parser (nsys CSV, nsys column tables, nvprof logs, torch.profiler) ends in the same row shape:
snake_case column names with the unit as a suffix, times as integer nanoseconds, NVTX names split
into `domain` and `range`. Keeping that here means the console, exports and analyses see one schema
whatever produced the numbers.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from perfconsole.core.profiling.errors import ProfileFormatError

Row = dict[str, Any]
# report -> its rows: a ProfileTable (core/profiling/table.py) from a reader, a list from a saved snapshot
Tables = dict[str, Sequence[Row]]

REPORTS = (
    "cuda_gpu_kern_sum", "nvtx_sum", "nvtx_pushpop_sum", "nvtx_kern_sum", "cuda_api_sum",
    "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "osrt_sum", "cuda_gpu_trace",
)
OLD_REPORT_NAMES = {
    "gputrace": "cuda_gpu_trace",
    "gpukernsum": "cuda_gpu_kern_sum", "cudaapisum": "cuda_api_sum", "gpumemtimesum": "cuda_gpu_mem_time_sum",
    "gpumemsizesum": "cuda_gpu_mem_size_sum", "osrtsum": "osrt_sum", "nvtxsum": "nvtx_sum",
    "nvtxppsum": "nvtx_pushpop_sum", "nvtxkernsum": "nvtx_kern_sum",
}
# Longest first: `x_cuda_gpu_kern_sum` must not be read as a `kern_sum`-like shorter name (FORMATS.md §3).
_ALL_NAMES = sorted([*REPORTS, *OLD_REPORT_NAMES], key=len, reverse=True)

_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
# Header words without a unit; their values are ns in the time reports (FORMATS.md §2.1).
_BARE_TIME = {"average": "avg", "minimum": "min", "maximum": "max", "stddev": "stddev", "median": "med"}
_STAT_WORDS = {"avg": "avg", "med": "med", "min": "min", "max": "max", "stddev": "stddev", "total": "total",
               "total time": "total_time"}
_PLAIN = {
    "time(%)": "time_pct", "time (%)": "time_pct", "instances": "instances", "num calls": "num_calls",
    "count": "count", "operations": "count", "name": "name", "kernel name": "name", "operation": "operation",
    "style": "style", "range": "range", "nvtx range": "range", "pid": "pid", "tid": "tid",
    "nvtx inst": "nvtx_inst", "kern inst": "kern_inst",
}
_INT_COLS = {"instances", "num_calls", "count", "pid", "tid", "nvtx_inst", "kern_inst"}
_TEXT_COLS = {"name", "operation", "style", "range"}
_HEAD_RE = re.compile(r"^(?P<word>[A-Za-z ]+?)\s*\((?P<unit>ns|us|ms|s|MB|KB|KiB|%)\)$")

# Operation names changed spelling across nsys versions; compare runs on the long form (FORMATS.md §2.5).
_MEMOP_LONG = {"DtoD": "Device-to-Device", "DtoH": "Device-to-Host", "HtoD": "Host-to-Device",
               "HtoH": "Host-to-Host", "PtoP": "Peer-to-Peer"}
_MEMOP_RE = re.compile(r"\b(DtoD|DtoH|HtoD|HtoH|PtoP)\b")


def canonical_report(name: str) -> str | None:
    """`gpukernsum` -> `cuda_gpu_kern_sum`; a current name maps to itself; anything else to None."""
    name = name.split(":", 1)[0].strip().lower()
    if name in REPORTS:
        return name
    return OLD_REPORT_NAMES.get(name)


def report_from_stem(stem: str) -> str | None:
    """The report a file written by `nsys stats -o PREFIX` holds, from its stem (doubled suffixes too)."""
    low = stem.lower()
    for name in _ALL_NAMES:
        if low == name or low.endswith("_" + name):
            return canonical_report(name)
    return None


def normalise_column(header: str) -> tuple[str, int | float | None]:
    """Map a header cell to (snake_case name, factor to the stored unit); factor None means text/int as is.

    Times are stored in ns (factor converts from the header's unit), sizes in MB.
    """
    raw = header.strip()
    low = raw.lower()
    if low in _PLAIN:
        return _PLAIN[low], None
    m = _HEAD_RE.match(raw)
    if m:
        word, unit = m.group("word").strip().lower(), m.group("unit")
        base = _STAT_WORDS.get(word) or _BARE_TIME.get(word) or _snake(word)
        if unit == "%":
            return f"{base}_pct", None
        if unit in _UNIT_NS:
            return f"{base}_ns", _UNIT_NS[unit]
        if unit == "MB":
            return f"{base}_mb", 1
        return f"{base}_mb", 1.024e-3  # KiB (old gpumemsizesum) -> MB
    if low in _BARE_TIME:
        return f"{_BARE_TIME[low]}_ns", 1
    if low == "total":  # old gpumemsizesum: KiB
        return "total_mb", 1.024e-3
    return _snake(raw), None


def _snake(text: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")


def known_header(fields: Sequence[str]) -> bool:
    """Whether a row of cells is a report header (every cell a known column, a label column present)."""
    if len(fields) < 3:
        return False
    names = [normalise_column(f)[0] for f in fields]
    known = set(_PLAIN.values()) | {f"{s}_{u}" for s in (*_STAT_WORDS.values(), *_BARE_TIME.values())
                                     for u in ("ns", "mb")} | {"time_pct"}
    return all(n in known for n in names) and any(n in ("name", "range", "operation") for n in names)


def report_from_header(fields: Sequence[str], hint: str | None = None) -> str | None:
    """Infer the report from its columns (FORMATS.md §4); `hint` (file name) settles cuda_api vs osrt."""
    names = [normalise_column(f)[0] for f in fields]
    s = set(names)
    if names[:4] == ["range", "style", "pid", "tid"]:
        return "nvtx_kern_sum"
    if names and names[-1] == "range":
        return "nvtx_sum" if "style" in s else "nvtx_pushpop_sum"
    if "num_calls" in s:
        return hint if hint in ("cuda_api_sum", "osrt_sum") else None
    if "instances" in s and names[-1] == "name":
        return "cuda_gpu_kern_sum"
    if names and names[-1] == "operation":
        if "time_pct" not in s and "total_mb" in s:
            return "cuda_gpu_mem_size_sum"
        if "count" in s:
            return "cuda_gpu_mem_time_sum"
    return None


def split_range(label: str) -> tuple[str, str]:
    """`Domain:range` -> (domain, range) at the first colon; `:forward` and `forward` -> ("", "forward")."""
    domain, sep, rest = label.partition(":")
    return (domain, rest) if sep else ("", label)


def normalise_memop(name: str) -> str:
    return _MEMOP_RE.sub(lambda m: _MEMOP_LONG[m.group(1)], name)


# nsys and nvprof keep times (ns) and counts in int64 (2**63 ns is 292 years), so a longer number is a
# corrupted field. Rejecting it here keeps consumers that divide or format in float (ns / 1e6, shares)
# from dying with OverflowError far from the file, and turns it into the usual `path:line:` message.
INT64_MAX = 2**63 - 1


class OutOfRange(ValueError):
    """A number that parses but cannot be a profiler value (beyond int64, or infinite)."""


def checked_int(value: int) -> int:
    """`value` itself; OutOfRange past int64 either way."""
    if -INT64_MAX <= value <= INT64_MAX:
        return value
    _out_of_range(str(value))


def ns_from_float(value: float) -> int:
    """A float time already scaled to ns, rounded; OutOfRange for inf/nan/beyond int64, not OverflowError."""
    if not math.isfinite(value):
        _not_finite(value)
    return checked_int(round(value))


def finite(value: float) -> float:
    """`value` itself; OutOfRange for inf/nan (what float() makes of a 400-digit field)."""
    if not math.isfinite(value):
        _not_finite(value)
    return value


def _not_finite(value: float) -> NoReturn:
    if math.isnan(value):
        raise ValueError("not a number: nan")
    _out_of_range(str(value))


def _out_of_range(text: str) -> NoReturn:
    raise OutOfRange(f"out of range: {text[:20]}{'...' if len(text) > 20 else ''}")


def _ns_int(text: str) -> int:
    # Integers stay exact (64-bit totals exceed float precision past 2**53); decimals are Avg/Med/StdDev.
    return _int(text) if text.isdigit() else ns_from_float(float(text))


def _pct(text: str) -> float:
    return finite(float(text.rstrip("%")))


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        if text.strip().lstrip("+-").isdigit():
            _out_of_range(text)  # int() refuses > 4300 digits; it is a number, just not a possible one
        raise
    return checked_int(value)


def _float(text: str) -> float:
    return finite(float(text))


def converters(headers: Sequence[str]) -> list[tuple[str, Callable[[str], Any]]]:
    """One (column name, str -> value) pair per header cell, built once per table.

    Cells must carry no thousands separators (column-table readers strip them before this).
    """
    out: list[tuple[str, Callable[[str], Any]]] = []
    for h in headers:
        name, factor = normalise_column(h)
        if name.endswith("_ns"):
            f = factor or 1
            out.append((name, _ns_int if f == 1 else (lambda t, f=f: ns_from_float(float(t) * f))))
        elif name.endswith("_mb"):
            f = factor or 1
            out.append((name, _float if f == 1 else (lambda t, f=f: finite(float(t) * f))))
        elif name.endswith("_pct"):
            out.append((name, _pct))
        elif name in _INT_COLS:
            out.append((name, _int))
        else:
            out.append((name, str))
    return out


def make_rows(report: str, headers: Sequence[str], cells: Sequence[Sequence[str]], path: str,
              first_line: int) -> list[Row]:
    """Typed rows from raw cells (row i sits on line first_line + i); a bad cell raises
    ProfileFormatError naming file and line. Converts column by column: 100k rows in well under a second."""
    conv = converters(headers)
    n = len(conv)
    if set(map(len, cells)) - {n}:
        i = next(i for i, c in enumerate(cells) if len(c) != n)
        raise ProfileFormatError(path, first_line + i, f"{report}: expected {n} fields, got {len(cells[i])}")
    columns: list[list[Any]] = []
    for j, raw in enumerate(zip(*cells)) if cells else ():
        name, fn = conv[j]
        try:
            if fn is _ns_int:
                columns.append(_ns_column(raw))
            elif fn is _pct:
                columns.append(_pct_column(raw))
            else:
                columns.append(list(map(fn, raw)))
        except (ValueError, OverflowError):
            # The column failed as a whole; the cell that fails alone is the one to name (the first
            # cell as a fallback, should the column and cell checks ever disagree).
            i, exc = next(((i, e) for i, t in enumerate(raw) if (e := _cell_error(fn, t)) is not None), (0, None))
            what = "is out of range (beyond int64 or infinite)" if isinstance(exc, OutOfRange) else "is not a number"
            raise ProfileFormatError(path, first_line + i, f"{report}: {headers[j].strip()!r} {what}: "
                                                           f"{clip(raw[i])!r}") from None
    names = [name for name, _ in conv]
    rows = [dict(zip(names, values)) for values in zip(*columns)]
    return finish_rows(report, rows)


def _ns_column(raw: tuple[str, ...]) -> list[int]:
    """A whole ns column at C speed: integers exactly, or (Avg/Med/StdDev with decimals) rounded floats.

    round(inf) raises OverflowError, so a float column of a huge field fails here; an int column is
    range-checked as a whole (min/max run at C speed) and the caller finds the offending cell."""
    try:
        values = list(map(int, raw))
    except ValueError:
        values = list(map(round, map(float, raw)))  # type: ignore[arg-type]
    if values and (max(values) > INT64_MAX or min(values) < -INT64_MAX):
        raise OutOfRange("beyond int64")
    return values


def _pct_column(raw: tuple[str, ...]) -> list[float]:
    try:
        values = list(map(float, raw))
    except ValueError:
        values = list(map(_pct, raw))  # nvprof-style "45.21%"
    if not all(map(math.isfinite, values)):
        raise OutOfRange("not finite")
    return values


def _cell_error(fn: Callable[[str], Any], text: str) -> ValueError | None:
    try:
        fn(text)
    except ValueError as exc:
        return exc
    return None


def clip(text: str) -> str:
    """`text`, or its head and tail with its length when longer than 40 characters."""
    # A corrupted field can be thousands of characters; the message stays one readable line.
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} chars)"


def finish_rows(report: str, rows: list[Row]) -> list[Row]:
    """Report-specific touches: split NVTX labels, spell memory operations one way."""
    if report in ("nvtx_sum", "nvtx_pushpop_sum", "nvtx_kern_sum"):
        for row in rows:
            label = row.pop("range", "")
            domain, rng = split_range(label)
            row["domain"], row["range"] = domain, rng
    elif report in ("cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum"):
        for row in rows:
            if "operation" in row:
                row["operation"] = normalise_memop(row["operation"])
    return rows


def is_text_column(name: str) -> bool:
    return name in _TEXT_COLS

"""Parse an nvprof console log into the nsys-shaped tables.

nvprof prints `==PID== Profiling result:` followed by a table whose rows carry a section label
(`GPU activities:`, `API calls:`) on their first row only, and values with units (`1.2345s`,
`500.00ms`, `250.00us`, `800ns`, `45.21%`). `==PID== NVTX result:` repeats that per thread, domain
and range, with a `Range:` row for the range itself (read by nvprof_nvtx). Mapping onto nsys reports:
GPU activities -> cuda_gpu_kern_sum (memcpy/memset rows -> cuda_gpu_mem_time_sum),
API calls -> cuda_api_sum, Range rows -> nvtx_sum, GPU activities inside a range -> nvtx_kern_sum.
nvprof's own `==PID== Warning:` lines come through as warnings: they say the numbers are incomplete.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from perfconsole.core.profiling.columns import (
    OutOfRange, Row, Tables, checked_int, clip, finite, normalise_memop, ns_from_float,
)
from perfconsole.core.profiling.errors import ProfileFormatError
from perfconsole.core.profiling.nvprof_nvtx import NvtxResult
from perfconsole.core.profiling.table import table_from_rows

# `==PID==` on most lines; `========` (no PID) on the warnings nvprof prints outside any process
_PID = r"^==(?:\d+|=+)==\s*"
_RESULT = re.compile(_PID + r"Profiling result:")
_NVTX = re.compile(_PID + r"NVTX result:")
_DOMAIN = re.compile(_PID + r"Domain \"(.*)\"\s*$")
_RANGE = re.compile(_PID + r"Range \"(.*)\"\s*$")
_THREAD = re.compile(_PID + r"Thread ")
_WARNING = re.compile(_PID + r"(Warning:.*?)\s*$")
_ANY_PID = re.compile(_PID)
_HEADER = re.compile(r"^\s*Type\s+Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name\s*$")
_ROW = re.compile(
    # any label: rows of sections no table maps ("OpenACC (excl):") must parse too, not read as malformed
    r"^\s*(?:(?P<type>[A-Za-z][A-Za-z ()/-]*):)?\s+(?P<pct>[\d.]+)%\s+(?P<time>\S+)\s+(?P<calls>\d+)"
    r"\s+(?P<avg>\S+)\s+(?P<min>\S+)\s+(?P<max>\S+)\s+(?P<name>\S.*?)\s*$")
_TIME = re.compile(r"^(?P<v>\d+(?:\.\d+)?)(?P<u>s|ms|us|ns)$")
_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def looks_like_nvprof(text: str) -> bool:
    return bool(re.search(_PID + r"(Profiling result:|NVTX result:|NVPROF is profiling)", text[:200_000], re.M))


def parse_time(text: str) -> int:
    """`1.2345ms` -> 1234500 (ns). nvprof always prints a unit; ValueError for anything else,
    a 400-digit value included (it would be inf, and round(inf) raises OverflowError)."""
    m = _TIME.match(text)
    if not m:
        raise ValueError(f"not a time with unit s/ms/us/ns: {clip(text)!r}")
    try:
        return ns_from_float(float(m.group("v")) * _UNIT_NS[m.group("u")])
    except OutOfRange:
        raise OutOfRange(f"time out of range (beyond int64 ns): {clip(text)!r}") from None


@dataclass
class _Summary:
    kern: list[Row] = field(default_factory=list)
    mem: list[Row] = field(default_factory=list)
    api: list[Row] = field(default_factory=list)


def parse_nvprof(text: str, path: str) -> tuple[Tables, list[str]]:
    """Every table of an nvprof log; a malformed row or a cut-short NVTX section becomes a warning
    naming `path:line`, and skips only the rest of its section or range."""
    summary = _Summary()
    nvtx = NvtxResult(path)
    warnings: list[str] = []  # summary-section problems and nvprof's own warnings
    mode = None  # "summary" | "nvtx" | None (a section no table maps, e.g. Unified Memory)
    section = ""  # the type label rows inherit: continuation rows leave the column blank
    bad_section = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if _ANY_PID.match(line):
            if m := _WARNING.match(line):
                # e.g. "Found 1 invalid range marker(s)" between `NVTX result:` and the threads: the
                # section goes on, and the user learns the NVTX numbers miss a range
                warnings.append(f"{path}:{lineno}: nvprof {m.group(1)}")
                continue
            section, bad_section = "", False
            if mode == "nvtx" and _nvtx_header(nvtx, line, lineno):
                continue
            if mode == "nvtx":
                nvtx.close()
            mode = "summary" if _RESULT.match(line) else "nvtx" if _NVTX.match(line) else None
            continue
        if mode is None or not line.strip() or _HEADER.match(line) or bad_section:
            continue
        m = _ROW.match(line)
        if m is None:
            if line.lstrip().startswith("No "):
                continue  # "No kernels were profiled in this range."
            _bad(warnings, nvtx, path, lineno, mode, "not an nvprof result row")
            bad_section = True
            continue
        if m.group("type"):
            section = m.group("type").strip()
        try:
            row, calls = _row(m)
        except ValueError as exc:
            _bad(warnings, nvtx, path, lineno, mode, str(exc))
            bad_section = True
            continue
        if mode == "nvtx":
            nvtx.row(section, row, calls, lineno)
        else:
            _add_summary(summary, section, row, calls)
    if mode == "nvtx":
        nvtx.close()
    tables = _tables(summary)
    tables.update(nvtx.tables())
    return {k: table_from_rows(v) for k, v in tables.items()}, _in_line_order([*warnings, *nvtx.warnings], path)


def _nvtx_header(nvtx: NvtxResult, line: str, lineno: int) -> bool:
    """Feed a Thread/Domain/Range line of the NVTX section to `nvtx`; False for any other `==PID==` line."""
    if _THREAD.match(line):
        nvtx.thread(lineno)
    elif m := _DOMAIN.match(line):
        nvtx.domain(m.group(1), lineno)
    elif m := _RANGE.match(line):
        nvtx.range(m.group(1), lineno)
    else:
        return False
    return True


def _bad(warnings: list[str], nvtx: NvtxResult, path: str, lineno: int, mode: str, why: str) -> None:
    if mode == "nvtx":
        nvtx.bad(lineno, why)
    else:
        warnings.append(str(ProfileFormatError(path, lineno, f"{why}; rest of the summary section skipped")))


def _row(m: re.Match[str]) -> tuple[Row, int]:
    calls = checked_int(int(m.group("calls")))
    return {"time_pct": finite(float(m.group("pct"))), "total_time_ns": parse_time(m.group("time")),
            "avg_ns": parse_time(m.group("avg")), "min_ns": parse_time(m.group("min")),
            "max_ns": parse_time(m.group("max")), "name": m.group("name")}, calls


def _add_summary(acc: _Summary, section: str, row: Row, calls: int) -> None:
    if section == "GPU activities":
        if row["name"].startswith("[CUDA mem"):
            op = normalise_memop(row.pop("name"))
            acc.mem.append({**_stats(row, "count", calls), "operation": op})
        else:
            acc.kern.append(_stats(row, "instances", calls))
    elif section == "API calls":
        acc.api.append(_stats(row, "num_calls", calls))


def _stats(row: Row, count_col: str, calls: int) -> Row:
    return {"time_pct": row["time_pct"], "total_time_ns": row["total_time_ns"], count_col: calls,
            "avg_ns": row["avg_ns"], "min_ns": row["min_ns"], "max_ns": row["max_ns"],
            **({"name": row["name"]} if "name" in row else {})}


def _tables(acc: _Summary) -> Tables:
    tables: Tables = {}
    if acc.kern:
        tables["cuda_gpu_kern_sum"] = acc.kern
    if acc.mem:
        tables["cuda_gpu_mem_time_sum"] = acc.mem
    if acc.api:
        tables["cuda_api_sum"] = acc.api
    return tables


def _in_line_order(warnings: list[str], path: str) -> list[str]:
    # Two sources fill the list; the user reads them top to bottom like the file.
    def line_of(w: str) -> int:
        head = w[len(path) + 1:].split(":", 1)[0]
        return int(head) if head.isdigit() else 0
    return sorted(warnings, key=line_of)

"""Parse an nvprof console log into the nsys-shaped tables.

nvprof prints `==PID== Profiling result:` followed by a table whose rows carry a section label
(`GPU activities:`, `API calls:`) on their first row only, and values with units (`1.2345s`,
`500.00ms`, `250.00us`, `800ns`, `45.21%`). `==PID== NVTX result:` repeats that per thread, domain
and range, with a `Range:` row for the range itself. Mapping onto nsys reports:
GPU activities -> cuda_gpu_kern_sum (memcpy/memset rows -> cuda_gpu_mem_time_sum),
API calls -> cuda_api_sum, Range rows -> nvtx_sum, GPU activities inside a range -> nvtx_kern_sum.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from perfconsole.core.profiling.columns import Row, Tables, normalise_memop
from perfconsole.core.profiling.errors import ProfileFormatError

_PID = r"^==\d+==\s*"
_RESULT = re.compile(_PID + r"Profiling result:")
_NVTX = re.compile(_PID + r"NVTX result:")
_DOMAIN = re.compile(_PID + r"Domain \"(.*)\"\s*$")
_RANGE = re.compile(_PID + r"Range \"(.*)\"\s*$")
_THREAD = re.compile(_PID + r"Thread ")
_ANY_PID = re.compile(_PID)
_HEADER = re.compile(r"^\s*Type\s+Time\(%\)\s+Time\s+Calls\s+Avg\s+Min\s+Max\s+Name\s*$")
_ROW = re.compile(
    r"^\s*(?:(?P<type>[A-Za-z][A-Za-z ]*):)?\s+(?P<pct>[\d.]+)%\s+(?P<time>\S+)\s+(?P<calls>\d+)"
    r"\s+(?P<avg>\S+)\s+(?P<min>\S+)\s+(?P<max>\S+)\s+(?P<name>\S.*?)\s*$")
_TIME = re.compile(r"^(?P<v>\d+(?:\.\d+)?)(?P<u>s|ms|us|ns)$")
_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def looks_like_nvprof(text: str) -> bool:
    return bool(re.search(_PID + r"(Profiling result:|NVTX result:|NVPROF is profiling)", text[:200_000], re.M))


def parse_time(text: str) -> int:
    """`1.2345ms` -> 1234500 (ns). nvprof always prints a unit."""
    m = _TIME.match(text)
    if not m:
        raise ValueError(f"not a time with unit s/ms/us/ns: {text!r}")
    return round(float(m.group("v")) * _UNIT_NS[m.group("u")])


@dataclass
class _Acc:
    kern: list[Row] = field(default_factory=list)
    mem: list[Row] = field(default_factory=list)
    api: list[Row] = field(default_factory=list)
    nvtx: dict[tuple[str, str], Row] = field(default_factory=dict)
    nvtx_kern: dict[tuple[str, str, str], Row] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def parse_nvprof(text: str, path: str) -> tuple[Tables, list[str]]:
    acc = _Acc()
    mode = None  # "summary" | "nvtx" | None
    domain, rng, section = "", "", ""
    bad_section = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if _RESULT.match(line):
            mode, section, bad_section = "summary", "", False
            continue
        if _NVTX.match(line):
            mode, section = "nvtx", ""
            continue
        if mode == "nvtx" and (m := _DOMAIN.match(line)):
            domain = "" if m.group(1) == "<unnamed>" else m.group(1)
            continue
        if mode == "nvtx" and (m := _RANGE.match(line)):
            rng, section, bad_section = m.group(1), "", False
            continue
        if _ANY_PID.match(line):
            if not (mode == "nvtx" and _THREAD.match(line)):
                mode = None  # another section (Unified Memory, "Profiling application", ...): not a table we map
            continue
        if mode is None or not line.strip() or _HEADER.match(line) or bad_section:
            continue
        m = _ROW.match(line)
        if m is None:
            if line.lstrip().startswith("No ") or line.startswith("=="):
                continue  # "No kernels were profiled in range", thread lines
            _bad(acc, path, lineno, "not an nvprof result row", mode, rng)
            bad_section = True
            continue
        if m.group("type"):
            section = m.group("type").strip()
        try:
            row = _row(m)
        except ValueError as exc:
            _bad(acc, path, lineno, str(exc), mode, rng)
            bad_section = True
            continue
        _add(acc, mode, section, domain, rng, row)
    return _tables(acc), acc.warnings


def _bad(acc: _Acc, path: str, lineno: int, why: str, mode: str | None, rng: str) -> None:
    where = f"range {rng!r}" if mode == "nvtx" else "summary"
    acc.warnings.append(str(ProfileFormatError(path, lineno, f"{why}; rest of the {where} section skipped")))


def _row(m: re.Match[str]) -> Row:
    calls = int(m.group("calls"))
    return {"time_pct": float(m.group("pct")), "total_time_ns": parse_time(m.group("time")), "calls": calls,
            "avg_ns": parse_time(m.group("avg")), "min_ns": parse_time(m.group("min")),
            "max_ns": parse_time(m.group("max")), "name": m.group("name")}


def _add(acc: _Acc, mode: str, section: str, domain: str, rng: str, row: Row) -> None:
    calls = row.pop("calls")
    if mode == "summary":
        if section == "GPU activities":
            if row["name"].startswith("[CUDA mem"):
                op = normalise_memop(row.pop("name"))
                acc.mem.append({**_stats(row, "count", calls), "operation": op})
            else:
                acc.kern.append(_stats(row, "instances", calls))
        elif section == "API calls":
            acc.api.append(_stats(row, "num_calls", calls))
        return
    if section == "Range":
        key = (domain, rng)
        prev = acc.nvtx.get(key)  # one block per thread: add the threads up
        acc.nvtx[key] = _merge(prev, row, "instances", calls)
    elif section == "GPU activities":
        key3 = (domain, rng, row["name"])
        prev = acc.nvtx_kern.get(key3)
        acc.nvtx_kern[key3] = _merge(prev, row, "kern_inst", calls)


def _stats(row: Row, count_col: str, calls: int) -> Row:
    return {"time_pct": row["time_pct"], "total_time_ns": row["total_time_ns"], count_col: calls,
            "avg_ns": row["avg_ns"], "min_ns": row["min_ns"], "max_ns": row["max_ns"],
            **({"name": row["name"]} if "name" in row else {})}


def _merge(prev: Row | None, row: Row, count_col: str, calls: int) -> Row:
    if prev is None:
        return _stats(row, count_col, calls)
    total, n = prev["total_time_ns"] + row["total_time_ns"], prev[count_col] + calls
    return {**prev, "total_time_ns": total, count_col: n, "avg_ns": round(total / n) if n else 0,
            "min_ns": min(prev["min_ns"], row["min_ns"]), "max_ns": max(prev["max_ns"], row["max_ns"])}


def _tables(acc: _Acc) -> Tables:
    tables: Tables = {}
    if acc.kern:
        tables["cuda_gpu_kern_sum"] = acc.kern
    if acc.mem:
        tables["cuda_gpu_mem_time_sum"] = acc.mem
    if acc.api:
        tables["cuda_api_sum"] = acc.api
    if acc.nvtx:
        rows = []
        grand = sum(r["total_time_ns"] for r in acc.nvtx.values()) or 1
        for (domain, rng), r in acc.nvtx.items():
            name = r.pop("name", rng)
            rows.append({**r, "time_pct": round(100 * r["total_time_ns"] / grand, 1), "style": "PushPop",
                         "domain": domain, "range": rng or name})
        tables["nvtx_sum"] = sorted(rows, key=lambda r: -r["total_time_ns"])
    if acc.nvtx_kern:
        inst = {k: r["instances"] for k, r in acc.nvtx.items()}
        rows = [{"domain": d, "range": r, "nvtx_inst": inst.get((d, r), 0), "kern_inst": v["kern_inst"],
                 "total_time_ns": v["total_time_ns"], "avg_ns": v["avg_ns"], "min_ns": v["min_ns"],
                 "max_ns": v["max_ns"], "name": name}
                for (d, r, name), v in acc.nvtx_kern.items()]
        tables["nvtx_kern_sum"] = sorted(rows, key=lambda r: -r["total_time_ns"])
    return tables

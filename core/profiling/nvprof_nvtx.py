"""The `==PID== NVTX result:` section of an nvprof log, as nsys's nvtx_sum and nvtx_kern_sum tables.

nvprof prints the section per thread, then per domain, then per range:

    ==PID== NVTX result:
    ==PID== Warning: Found 1 invalid range marker(s)        (optional, comes through as a warning)
    ==PID==   Thread "<unnamed>" (id = N)
    ==PID==     Domain "NCCL"
    ==PID==       Range "ncclAllReduce"
                Type  Time(%)  Time  Calls  Avg  Min  Max  Name
              Range:  100.00%  629.69ms  4  157.42ms  60.081us  629.49ms  ncclAllReduce
     GPU activities:  100.00%  67.776us  4  16.944us  ...  ncclKernel_SendRecv_...
          API calls:  100.00%  629.44ms  4  157.36ms  ...  cudaLaunchKernelExC

The `Range:` row becomes an nvtx_sum row and each GPU activities row (continuation rows included) an
nvtx_kern_sum row, keyed like nsys's: `domain` ("" for `<unnamed>`, as nsys's leading-colon labels
split) and `range`. nvtx_sum is one row per (domain, range) and nvtx_kern_sum one per (domain, range,
kernel), summed over threads, as nsys's nvtx_sum is; nvprof's thread ids are pthread handles that
match nothing else, so they are not kept. Left out, because the nsys tables have no place for them:
the API calls inside a range, and memcpy/memset rows (nsys's nvtx_kern_sum holds kernels only, and
phase shares must mean the same whichever profiler wrote them).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from perfconsole.core.profiling.columns import Row, Tables
from perfconsole.core.profiling.errors import ProfileFormatError

UNNAMED = "<unnamed>"
_DEPTH = {"thread": 0, "domain": 1, "range": 2}  # nesting of the section's header lines


@dataclass
class _Block:
    """A Thread, Domain or Range header whose contents are still being read."""
    kind: str  # "thread" | "domain" | "range"
    name: str
    line: int
    filled: bool = False  # saw what such a block must hold (a domain, a range, a Range: row)
    reported: bool = False  # a warning already names this block: don't add "truncated" on top


@dataclass
class NvtxResult:
    """Accumulates every NVTX result block of one log; `warnings` are `path:line: ...` strings."""
    path: str
    warnings: list[str] = field(default_factory=list)
    _ranges: dict[tuple[str, str], Row] = field(default_factory=dict)
    _kernels: dict[tuple[str, str, str], Row] = field(default_factory=dict)
    _open: list[_Block] = field(default_factory=list)  # thread > domain > range, innermost last
    _skipping: bool = False  # a bad row: the rest of its range is skipped (its numbers can't be trusted)

    def thread(self, lineno: int) -> None:
        self._enter(_Block("thread", "", lineno))

    def domain(self, name: str, lineno: int) -> None:
        self._enter(_Block("domain", "" if name == UNNAMED else name, lineno))

    def range(self, name: str, lineno: int) -> None:
        self._enter(_Block("range", name, lineno))  # without a Domain line: the default domain ""

    def row(self, section: str, row: Row, calls: int, lineno: int) -> None:
        """One parsed result row of the current range; `section` is the row's (inherited) type label."""
        rng = self._current("range")
        if self._skipping:
            return
        if rng is None:
            self.bad(lineno, "NVTX result row outside any Range block")
            return
        domain = self._current("domain")
        key = (domain.name if domain else "", rng.name)
        if section == "Range":
            rng.filled = True
            self._ranges[key] = _merge(self._ranges.get(key), row, "instances", calls)
        elif section == "GPU activities" and not row["name"].startswith("[CUDA "):
            k3 = (*key, row["name"])
            self._kernels[k3] = _merge(self._kernels.get(k3), row, "kern_inst", calls)
        # "API calls" (and memcpy/memset rows): no nsys table to hold them

    def bad(self, lineno: int, why: str) -> None:
        """A row that can't be read: warn once, and skip the rest of its range."""
        rng = self._current("range")
        rest = f"rest of the NVTX range {rng.name!r} skipped" if rng else "NVTX rows skipped up to the next Range line"
        self.warnings.append(str(ProfileFormatError(self.path, lineno, f"{why}; {rest}")))
        for b in self._open:
            b.reported = True
        self._skipping = True

    def close(self) -> None:
        """The section ended (another section, end of file): check the blocks still open."""
        while self._open:
            self._leave()

    def tables(self) -> Tables:
        tables: Tables = {}
        if self._ranges:
            grand = sum(r["total_time_ns"] for r in self._ranges.values()) or 1
            # Time (%) as nsys prints it: this range's share of all ranges' time, 1 decimal
            rows = [{"time_pct": round(100 * r["total_time_ns"] / grand, 1), **r, "style": "PushPop",
                     "domain": d, "range": rng} for (d, rng), r in self._ranges.items()]
            tables["nvtx_sum"] = sorted(rows, key=lambda r: -r["total_time_ns"])  # nsys's order
        if self._kernels:
            inst = {k: r["instances"] for k, r in self._ranges.items()}
            rows = [{"domain": d, "range": rng, "style": "PushPop", "nvtx_inst": inst.get((d, rng), 0),
                     "kern_inst": v["kern_inst"], "total_time_ns": v["total_time_ns"], "avg_ns": v["avg_ns"],
                     "min_ns": v["min_ns"], "max_ns": v["max_ns"], "name": name}
                    for (d, rng, name), v in self._kernels.items()]
            tables["nvtx_kern_sum"] = sorted(rows, key=lambda r: -r["total_time_ns"])
        return tables

    # A header closes every open block at its level or deeper; what a closed block lacked is reported
    # at that block's own header line, so a log cut short says where its last complete part ends.
    def _enter(self, block: _Block) -> None:
        while self._open and _DEPTH[self._open[-1].kind] >= _DEPTH[block.kind]:
            self._leave()
        if self._open:
            self._open[-1].filled = True
        self._open.append(block)
        self._skipping = False

    def _leave(self) -> None:
        b = self._open.pop()
        if b.filled or b.reported:
            return
        what = {"thread": "no Domain", "domain": "no Range", "range": "no `Range:` row"}[b.kind]
        label = {"thread": "NVTX thread", "domain": f"NVTX domain {b.name or UNNAMED!r}",
                 "range": f"NVTX range {b.name!r}"}[b.kind]
        self.warnings.append(str(ProfileFormatError(
            self.path, b.line, f"{label} has {what} (NVTX section truncated?); nothing of it loaded")))
        for outer in self._open:
            outer.reported = True  # one warning per cut, not one per enclosing level

    def _current(self, kind: str) -> _Block | None:
        return next((b for b in reversed(self._open) if b.kind == kind), None)


def _merge(prev: Row | None, row: Row, count_col: str, calls: int) -> Row:
    """Add a thread's row to the same (domain, range[, kernel]) from earlier threads."""
    if prev is None:
        return {"total_time_ns": row["total_time_ns"], count_col: calls, "avg_ns": row["avg_ns"],
                "min_ns": row["min_ns"], "max_ns": row["max_ns"]}
    total, n = prev["total_time_ns"] + row["total_time_ns"], prev[count_col] + calls
    return {**prev, "total_time_ns": total, count_col: n, "avg_ns": round(total / n) if n else 0,
            "min_ns": min(prev["min_ns"], row["min_ns"]), "max_ns": max(prev["max_ns"], row["max_ns"])}

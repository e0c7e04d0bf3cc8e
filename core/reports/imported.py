"""An imported profile as a report (`perfconsole import ... --save`, then `export`): no spec and no steps, so its
kernels are the report. Markdown: the profile section and, where Nsight Compute's pages are in it, why each kernel
takes its time; CSV: a row per kernel, with ncu's figures where ncu profiled it. Where the kernel times are ncu's
replay durations (its pages alone, core.profiling.ncu_summary), both say so."""
from __future__ import annotations

import csv
import io
from typing import Any

from perfconsole.core.profiling.ncu_summary import KERNELS, REPLAY, REPLAY_NOTE, replay_times
from perfconsole.core.record import RunRecord

CSV_COLUMNS = ("run", "kernel", "category", "times", "total_ms", "count", "avg_us", "time_pct",
               "ncu_launch_configs", "ncu_replay_us", "compute_pct", "memory_pct", "dram_pct", "bound", "tflops",
               "gbps", "flop_per_byte", "flops_source", "precision", "achieved_occupancy_pct", "gain_ms",
               "top_rule", "rule_speedup_pct")
# the why row's figure for each CSV column after ncu_launch_configs (core.reports.kernel_why)
_WHY = {"ncu_launch_configs": "configs", "ncu_replay_us": "duration_us", "compute_pct": "compute_pct",
        "memory_pct": "memory_pct", "dram_pct": "dram_pct", "bound": "bound", "tflops": "tflops", "gbps": "gbps",
        "flop_per_byte": "intensity", "flops_source": "flops_source", "precision": "precision",
        "achieved_occupancy_pct": "achieved_occupancy_pct", "gain_ms": "gain_ms", "top_rule": "rule",
        "rule_speedup_pct": "rule_speedup_pct"}


def markdown(r: RunRecord) -> str:
    tables = r.profile.tables if r.profile else {}
    head = "- imported profile, no timed steps"
    if replay_times(tables):
        head += f"; {REPLAY_NOTE}"
    lines = [f"# {r.name}", "", head]
    if r.profile is not None:
        from perfconsole.core.reports.profile import markdown_lines  # pandas: only where a profile is

        lines += markdown_lines(r.profile, None, None)
        if tables.get("ncu_kernels"):
            from perfconsole.core.reports.kernel_why import markdown_lines as why_lines

            lines += why_lines(r)
    return "\n".join(lines) + "\n"


def csv_text(r: RunRecord) -> str:
    """A row per kernel of the kernel summary, largest total first (`times`: `ncu replay` or `capture`), ncu's
    figures beside it where ncu profiled it; then any kernel ncu profiled that the summary does not name."""
    from perfconsole.core.profiling.categories import categorize

    tables = r.profile.tables if r.profile else {}
    times = REPLAY if replay_times(tables) else "capture"
    why = _why(r)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    seen: set[str] = set()
    for k in sorted(tables.get(KERNELS) or [], key=lambda k: -(k.get("total_time_ns") or 0)):
        row = why.row(k["name"]) if why else None
        if row is not None:
            seen.add(row["key"])
        w.writerow([r.id, k["name"], categorize(k["name"]), times, _num((k.get("total_time_ns") or 0) / 1e6),
                    k.get("instances", ""), _num((k.get("avg_ns") or 0) / 1e3), _num(k.get("time_pct")),
                    *_ncu_cells(row)])
    for row in (why.rows if why else []):
        if row["key"] not in seen:
            w.writerow([r.id, row["name"], categorize(row["name"]), "", "", "", "", "", *_ncu_cells(row)])
    return out.getvalue()


def _why(r: RunRecord) -> Any:
    if not (r.profile and r.profile.tables.get("ncu_kernels")):
        return None
    from perfconsole.core.reports.kernel_why import kernel_why  # pandas: only where ncu's pages are

    return kernel_why(r)


def _ncu_cells(row: dict[str, Any] | None) -> list[Any]:
    return [_num(row.get(_WHY[c])) if row else "" for c in CSV_COLUMNS[CSV_COLUMNS.index("ncu_launch_configs"):]]


def _num(v: Any) -> Any:
    """Numbers as Python writes them, rounded to 6 places; None as an empty cell."""
    if v is None:
        return ""
    return round(v, 6) if isinstance(v, float) else v

"""Rows in nsys's summary shape from raw durations: what the torch profiler's tables and an imported
torch trace both build (total, count, avg, median, min, max, stddev in int ns, and time %)."""
from __future__ import annotations

import statistics

from perfconsole.core.profiling.columns import Row


def stats_row(values_ns: list[int], count_col: str) -> Row:
    total = sum(values_ns)
    n = len(values_ns)
    return {"total_time_ns": total, count_col: n, "avg_ns": round(total / n), "med_ns": round(statistics.median(values_ns)),
            "min_ns": min(values_ns), "max_ns": max(values_ns),
            "stddev_ns": round(statistics.stdev(values_ns)) if n > 1 else 0}


def with_time_pct(rows: list[Row]) -> list[Row]:
    """Largest total first, each with its share of the table's total (nsys's Time (%))."""
    grand = sum(r["total_time_ns"] for r in rows) or 1
    rows.sort(key=lambda r: -r["total_time_ns"])
    return [{"time_pct": round(100 * r["total_time_ns"] / grand, 1), **r} for r in rows]

"""Summary statistics of repeated timings: mean, std, median, min, max and a 95% interval."""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

# Two-sided 97.5% quantiles of Student's t for n-1 = 1..30 degrees of freedom; beyond, the normal's.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile_975(dof: int) -> float:
    if dof < 1:
        return math.nan
    return _T975[dof - 1] if dof <= len(_T975) else 1.960


@dataclass(frozen=True)
class Stat:
    """Statistics of one timing series, in the unit of its inputs (ms throughout perfconsole)."""
    n: int
    mean: float
    std: float
    median: float
    min: float
    max: float
    ci95_low: float | None    # None with fewer than 2 values: no interval, and JSON has no NaN
    ci95_high: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stat:
        return cls(**d)


def summarize(values: list[float]) -> Stat:
    if not values:
        raise ValueError("no values to summarize")
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    if n < 2:
        return Stat(n, mean, std, statistics.median(values), min(values), max(values), None, None)
    half = t_quantile_975(n - 1) * std / math.sqrt(n)
    return Stat(n, mean, std, statistics.median(values), min(values), max(values),
                mean - half, mean + half)


@dataclass(frozen=True)
class Speedup:
    """Ratio baseline/candidate of mean times with a 95% interval (delta method on the ratio)."""
    ratio: float
    ci95_low: float
    ci95_high: float

    @property
    def significant(self) -> bool:
        return not (self.ci95_low <= 1.0 <= self.ci95_high)


def speedup(baseline: Stat, candidate: Stat) -> Speedup:
    ratio = baseline.mean / candidate.mean
    # Relative standard errors add in quadrature for a ratio of independent means.
    rel = math.sqrt((baseline.std / math.sqrt(baseline.n) / baseline.mean) ** 2
                    + (candidate.std / math.sqrt(candidate.n) / candidate.mean) ** 2)
    dof = max(1, min(baseline.n, candidate.n) - 1)
    half = t_quantile_975(dof) * rel * ratio
    return Speedup(ratio, ratio - half, ratio + half)

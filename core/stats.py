"""Summary statistics of repeated timings: mean, std, median, min, max and a 95% interval.

Times and their ratios are positive and skewed (a slow first step, a stall), so both intervals are taken
on the log scale, where a symmetric t-interval maps back to a positive, asymmetric one: the step's is a
t-interval of the mean of log times (an interval of the geometric mean), the speedup's puts the ratio's
relative standard error on log(ratio). Ranges read `[low, high]` wherever they are printed (`interval_text`).
"""
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
    low, high = log_interval(values)
    return Stat(n, mean, std, statistics.median(values), min(values), max(values), low, high)


def log_interval(values: list[float]) -> tuple[float, float]:
    """The 95% t-interval of the mean of log(values), mapped back: positive wherever the values are.

    A short run with one slow step (a CPU run's first measured step, say) gave the arithmetic t-interval
    a negative low end; on the log scale the interval stays above zero and leans toward the slow tail.
    A value at or below zero has no log: then the arithmetic interval, held within [min, max], where the
    mean always lies.
    """
    n = len(values)
    t = t_quantile_975(n - 1)
    if min(values) > 0:
        logs = [math.log(v) for v in values]
        centre, half = statistics.fmean(logs), t * statistics.stdev(logs) / math.sqrt(n)
        return math.exp(centre - half), math.exp(centre + half)
    mean, half = statistics.fmean(values), t * statistics.stdev(values) / math.sqrt(n)
    return max(mean - half, min(values)), min(mean + half, max(values))


def interval_text(low: float | None, high: float | None, fmt: str = ",.3f") -> str:
    """`[low, high]`, the one way a range is printed; "-" where there is no interval."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "-"
    return f"[{format(low, fmt)}, {format(high, fmt)}]"


def ratio_text(ratio: float | None, digits: int = 2, faster: bool = True) -> str:
    """A speedup (baseline time / time) in words, the one way every report and table says one: "1.30x
    faster" ("1.30x" with `faster` off, where a column or a sentence already says speedup), "4.80x slower"
    (never "0.21x"); "-" where there is none.

    Below 1 the run is slower by the inverse ratio, which is how a slowdown is said."""
    if ratio is None or math.isnan(ratio):
        return "-"
    if ratio >= 1:
        return f"{ratio:.{digits}f}x" + (" faster" if faster else "")
    return f"{1 / ratio:.{digits}f}x slower" if ratio > 0 else "slower (no time for the baseline)"


@dataclass(frozen=True)
class Speedup:
    """Ratio baseline/candidate of mean times with a 95% interval (delta method on log(ratio): positive)."""
    ratio: float
    ci95_low: float
    ci95_high: float

    @property
    def significant(self) -> bool:
        if math.isnan(self.ci95_low):
            return False
        return not (self.ci95_low <= 1.0 <= self.ci95_high)


def speedup(baseline: Stat, candidate: Stat) -> Speedup:
    ratio = baseline.mean / candidate.mean
    if min(baseline.n, candidate.n) < 2:  # one step a side has no spread: no interval (NaN, never significant)
        return Speedup(ratio, math.nan, math.nan)
    # Relative standard errors add in quadrature for a ratio of independent means; a relative error is the
    # standard error of a log, so the interval is symmetric in log(ratio) and never reaches zero.
    rel = math.sqrt((baseline.std / math.sqrt(baseline.n) / baseline.mean) ** 2
                    + (candidate.std / math.sqrt(candidate.n) / candidate.mean) ** 2)
    dof = max(1, min(baseline.n, candidate.n) - 1)
    factor = math.exp(t_quantile_975(dof) * rel)
    return Speedup(ratio, ratio / factor, ratio * factor)

"""Summary statistics of repeated timings: mean, std, median, min, max and a 95% interval of the median.

Times are positive and skewed (a slow first step, a stall), and a run may have only a few of them, so the
step's interval is the distribution-free one of the median: two order statistics of the sorted values,
chosen from the binomial distribution so that they hold the median with at least 95% confidence whatever the
times' distribution. It always lies within [min, max], stands beside the median it bounds, and exists only
from MEDIAN_CI_MIN_N values on; with fewer there is none, and the screens say so. A comparison's speedup is a
ratio of means: its interval puts the ratio's relative standard error on log(ratio), so it is positive, and
needs SPEEDUP_MIN_N values a side. Ranges read `[low, high]` wherever they are printed (`interval_text`).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

# Two-sided 97.5% quantiles of Student's t for n-1 = 1..30 degrees of freedom; beyond, the normal's.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)

# The fewest values whose extremes hold the median with 95% confidence: 1 - 2 / 2**6 = 96.9%; with five,
# min and max hold it only 1 - 2 / 2**5 = 93.8% of the time, so no interval of the median exists.
MEDIAN_CI_MIN_N = 6
# The fewest values a side for a speedup's interval: with two, Student's quantile is 12.706, and two CPU
# processes that differed 1.6x gave "1.09x, 95% CI [0.00, 1858.54]", which says nothing the values did not.
SPEEDUP_MIN_N = 3


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
    # The 95% interval of the median (`median_interval`); None with fewer than MEDIAN_CI_MIN_N values.
    ci95_low: float | None
    ci95_high: float | None
    # What the interval bounds. None in a record saved before it was the median's (its interval was of the
    # geometric mean, and is not shown beside the median): core.run_summary.refit_intervals recomputes it there.
    ci95_of: str | None = "median"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stat:
        if "ci95_of" not in d:  # an older record's interval of the geometric mean
            d = {**d, "ci95_low": None, "ci95_high": None, "ci95_of": None}
        return cls(**d)

    @property
    def too_few(self) -> bool:
        """Spread was measured (two values or more) but too few values for an interval of the median."""
        return self.ci95_of == "median" and 1 < self.n < MEDIAN_CI_MIN_N


def summarize(values: list[float]) -> Stat:
    if not values:
        raise ValueError("no values to summarize")
    n = len(values)
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if n > 1 else 0.0
    low, high = median_interval(values) or (None, None)
    return Stat(n, mean, std, statistics.median(values), min(values), max(values), low, high)


@lru_cache(maxsize=None)
def median_rank(n: int) -> int:
    """The largest j with P(Binomial(n, 1/2) < j) <= 2.5%: the j-th smallest and the j-th largest of n values
    hold their median with at least 95% confidence. 0 where no j does (n < MEDIAN_CI_MIN_N)."""
    if n > 2000:  # the normal approximation, within one rank of the exact count here
        return max(1, math.floor((n - 1.959964 * math.sqrt(n)) / 2))
    whole, below, term, j = 1 << n, 0, 1, 0    # below: ways to have fewer than j values under the median
    while (below + term) * 40 <= whole:         # P(B < j + 1) <= 1/40
        below += term
        term = term * (n - j) // (j + 1)
        j += 1
    return j


def median_interval(values: list[float]) -> tuple[float, float] | None:
    """The distribution-free 95% interval of the median: the j-th smallest and j-th largest value
    (`median_rank`), inside [min, max] by construction; None with too few values for one."""
    j = median_rank(len(values))
    if j == 0:
        return None
    ordered = sorted(values)
    return ordered[j - 1], ordered[-j]


def refit(old: Stat | None, fresh: Stat | None) -> Stat | None:
    """An older record's statistics with today's interval, taken from `fresh` (summarize of the values they were
    computed from) where those are the same values: same count, same median. Else unchanged."""
    if old is None or old.ci95_of is not None or fresh is None:
        return old
    if fresh.n != old.n or not math.isclose(fresh.median, old.median, rel_tol=1e-9, abs_tol=1e-12):
        return old
    return replace(old, ci95_low=fresh.ci95_low, ci95_high=fresh.ci95_high, ci95_of=fresh.ci95_of)


def interval_text(low: float | None, high: float | None, fmt: str = ",.3f") -> str:
    """`[low, high]`, the one way a range is printed; "-" where there is no interval."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "-"
    return f"[{format(low, fmt)}, {format(high, fmt)}]"


def median_interval_text(st: Stat, fmt: str = ",.3f", of: str = "steps") -> str:
    """The cell beside a median: its interval, "too few steps" (or processes) where there are two to five
    values, "-" for one value (no spread) or an older record whose values are gone."""
    if st.too_few:
        return f"too few {of}"
    return interval_text(st.ci95_low, st.ci95_high, fmt)


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
    """Ratio baseline/candidate of mean times with a 95% interval (delta method on log(ratio): positive); NaN
    bounds where either side has fewer than SPEEDUP_MIN_N values (`n`, the smaller side's count)."""
    ratio: float
    ci95_low: float
    ci95_high: float
    n: int = 0

    @property
    def significant(self) -> bool:
        if math.isnan(self.ci95_low):
            return False
        return not (self.ci95_low <= 1.0 <= self.ci95_high)


def speedup(baseline: Stat, candidate: Stat) -> Speedup:
    ratio = baseline.mean / candidate.mean
    n = min(baseline.n, candidate.n)
    if n < SPEEDUP_MIN_N:  # no interval (NaN, never significant): the text says too few
        return Speedup(ratio, math.nan, math.nan, n)
    # Relative standard errors add in quadrature for a ratio of independent means; a relative error is the
    # standard error of a log, so the interval is symmetric in log(ratio) and never reaches zero.
    rel = math.sqrt((baseline.std / math.sqrt(baseline.n) / baseline.mean) ** 2
                    + (candidate.std / math.sqrt(candidate.n) / candidate.mean) ** 2)
    factor = math.exp(t_quantile_975(n - 1) * rel)
    return Speedup(ratio, ratio / factor, ratio * factor, n)

"""A gate's verdict on one metric, from paired samples of two programs A (the base) and B (the change).

Each sample pairs one value of A with one of B measured side by side: a round of interleaved processes (A's
process, then B's) or, in paired mode, one step of each inside one process. A relative threshold (`3%`) is
judged on the ratio B/A, in logarithms, so the interval is positive and a slow spell that hits both members of
a pair cancels in their ratio. Over processes the estimate is the geometric mean of the rounds' ratios and its
95% interval Student's t on their logarithms (the log-ratio t-interval); over single steps (paired mode) it is
the median of the pairs' log ratios and that median's distribution-free interval, which a few steps that met a
neighbour's burst do not widen. An absolute threshold (`64MiB`) is judged on the
difference B - A with the same t-interval on the differences.

The interval, not the estimate, decides: wholly beyond the threshold in B's worse direction is `regression`,
wholly beyond it in the better direction `improved`, wholly within ±threshold `same`, and an interval that
straddles an edge is `inconclusive`; then `more_needed` estimates how many more samples would shrink it past
the nearest edge (from the samples' spread, which assumes the next samples scatter as these did).
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from perfconsole.core.stats import MEDIAN_CI_MIN_N, SPEEDUP_MIN_N, median_interval, t_quantile_975

VERDICTS = ("regression", "improved", "same", "inconclusive", "unmeasured")
# Summary fields where more is better; every other gated figure (times, memory) is better smaller.
HIGHER_IS_BETTER = ("tokens_per_s", "mfu", "achieved_tflops")
MOST_SAMPLES = 100_000  # the estimate of samples needed stops here: beyond it, it says "more than"


@dataclass(frozen=True)
class Threshold:
    """How far B may move from A and still be `same`: a fraction of A (relative) or an amount in the metric's
    unit (MiB for memory)."""
    value: float
    relative: bool

    def text(self, unit: str = "") -> str:
        if self.relative:
            return f"{self.value * 100:g}%"
        return f"{self.value:g} {unit}".strip()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_threshold(text: str, flag: str, units: tuple[str, ...] = ()) -> Threshold:
    """`3%` (relative), or where `units` allows it an amount such as `64MiB` or `64` (in the first unit)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%|[A-Za-z]+)?\s*", text)
    unit = (m.group(2) or "") if m else ""
    if m and unit == "%":
        return Threshold(float(m.group(1)) / 100, True)
    if m and units and (unit == "" or unit.lower() in [u.lower() for u in units]):
        return Threshold(float(m.group(1)), False)
    allowed = "a percentage such as 3%" + (f" or an amount in {units[0]} such as 64{units[0]}" if units else "")
    raise ValueError(f"{flag}: give {allowed}, not {text!r}")


@dataclass(frozen=True)
class MetricVerdict:
    """One metric's comparison: A's and B's medians, B against A (ratio or difference) with its interval, the
    verdict and, where inconclusive, the samples it estimates would decide it (None: no estimate)."""
    metric: str
    unit: str
    higher_is_better: bool
    threshold: Threshold
    a: float | None
    b: float | None
    estimate: float | None      # ratio B/A (relative threshold) or difference B - A (absolute)
    low: float | None
    high: float | None
    n: int
    verdict: str
    more_needed: int | None = None
    note: str = ""

    @property
    def relative(self) -> bool:
        return self.threshold.relative

    def change_text(self) -> str:
        """B against A in words: "1.104x [1.081, 1.127]" or "+12.0 MiB [+10.0, +14.0]"; "-" with none."""
        if self.estimate is None:
            return "-"
        if self.relative:
            inside = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None and self.high is not None else ""
            return f"{self.estimate:.3f}x{inside}"
        inside = f" [{self.low:+,.1f}, {self.high:+,.1f}]" if self.low is not None and self.high is not None else ""
        return f"{self.estimate:+,.1f} {self.unit}{inside}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["threshold"] = self.threshold.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetricVerdict:
        return cls(**{**d, "threshold": Threshold(**d["threshold"])})


def classify(low: float, high: float, down: float, up: float, higher_is_better: bool) -> str:
    """The verdict of an interval [low, high] of B against A, whose `same` band is [down, up]."""
    if low > up:
        return "improved" if higher_is_better else "regression"
    if high < down:
        return "regression" if higher_is_better else "improved"
    if down <= low and high <= up:
        return "same"
    return "inconclusive"


def _edges(threshold: Threshold) -> tuple[float, float]:
    if threshold.relative:
        return 1 - threshold.value, 1 + threshold.value
    return -threshold.value, threshold.value


def samples_needed(center: float, sd: float, down: float, up: float) -> int | None:
    """The fewest samples whose interval (center ± t * sd / sqrt(n), all in the scale the edges are in) would
    no longer straddle the edge nearest the center; None where none would (the center sits on an edge)."""
    if center > up:
        distance = center - up
    elif center < down:
        distance = down - center
    else:
        distance = min(up - center, center - down)
    if distance <= 0 or sd <= 0:
        return None
    n = max(SPEEDUP_MIN_N, math.ceil((1.96 * sd / distance) ** 2))
    while n < MOST_SAMPLES and t_quantile_975(n - 1) * sd / math.sqrt(n) > distance:
        n += 1
    return n


def judge(metric: str, unit: str, pairs: list[tuple[float, float]], threshold: Threshold,
          higher_is_better: bool = False, method: str = "t") -> MetricVerdict:
    """The verdict on `pairs` of (A's value, B's value); values that are None or not positive (a relative
    threshold takes logarithms) leave the pair out. Fewer than SPEEDUP_MIN_N pairs: inconclusive, too few.

    `method` "t": the mean of the logs (or differences) and Student's t-interval. "median": their median and its
    distribution-free interval (core.stats.median_interval, from MEDIAN_CI_MIN_N pairs on), for single steps,
    whose pairs have heavy tails (a step that met a neighbour's burst) that would widen a t-interval."""
    kept = [(a, b) for a, b in pairs if a is not None and b is not None and (not threshold.relative or (a > 0 and b > 0))]
    a_med = statistics.median([a for a, _ in kept]) if kept else None
    b_med = statistics.median([b for _, b in kept]) if kept else None
    base = dict(metric=metric, unit=unit, higher_is_better=higher_is_better, threshold=threshold, a=a_med, b=b_med)
    if not kept:
        return MetricVerdict(**base, estimate=None, low=None, high=None, n=0, verdict="unmeasured",
                             note=f"no {metric} measured" + (" on either side" if pairs else ""))
    down, up = _edges(threshold)
    if threshold.relative:
        values = [math.log(b / a) for a, b in kept]
        down, up = math.log(down) if down > 0 else -math.inf, math.log(up)
        back = math.exp
    else:
        values = [b - a for a, b in kept]
        back = float
    n = len(values)
    center = statistics.median(values) if method == "median" else statistics.fmean(values)
    fewest = MEDIAN_CI_MIN_N if method == "median" else SPEEDUP_MIN_N
    if n < fewest:
        return MetricVerdict(**base, estimate=back(center), low=None, high=None, n=n, verdict="inconclusive",
                             more_needed=fewest - n, note=f"too few samples for an interval ({n})")
    if method == "median":
        low, high = median_interval(values)  # type: ignore[misc]
        # The median's standard error from a robust spread (1.4826 MAD; the median's efficiency factor 1.2533).
        sd = 1.2533 * 1.4826 * statistics.median(abs(v - center) for v in values)
    else:
        sd = statistics.stdev(values)
        half = t_quantile_975(n - 1) * sd / math.sqrt(n)
        low, high = center - half, center + half
    verdict = classify(low, high, down, up, higher_is_better)
    more = None
    if verdict == "inconclusive":
        need = samples_needed(center, sd, down, up)
        more = None if need is None else max(1, need - n)
    return MetricVerdict(**base, estimate=back(center), low=back(low), high=back(high), n=n,
                         verdict=verdict, more_needed=more)


def overall(verdicts: list[MetricVerdict]) -> str:
    """The gate's verdict: any regression, else any inconclusive, else improved where one improved, else same."""
    seen = {v.verdict for v in verdicts}
    for word in ("regression", "inconclusive", "improved", "same"):
        if word in seen:
            return word
    return "unmeasured"


def decided(verdicts: list[MetricVerdict]) -> bool:
    """Whether more samples could change nothing the gate says: no metric is inconclusive."""
    return all(v.verdict != "inconclusive" for v in verdicts)

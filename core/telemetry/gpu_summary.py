"""What a run's GPU telemetry adds up to: a compact series, min/median/max per field, the clock-event
(throttle) reasons seen and plain-English flags for a run held back by power or heat.

Pure data, no NVML: the recorder builds a `Telemetry` from its samples, a record stores `to_dict()`,
and reports read it back with `from_dict()` on machines without a GPU.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from perfconsole.core.run_summary import nvml_busy_share

# Numeric sample fields, in table order, with their units.
FIELDS: dict[str, str] = {
    "sm_clock_mhz": "MHz",
    "mem_clock_mhz": "MHz",
    "power_w": "W",
    "power_limit_w": "W",
    "temperature_c": "°C",
    "gpu_util_pct": "%",
    "mem_util_pct": "%",
    "memory_used_mib": "MiB",
}

# NVML's clock-event reasons, by the short names a sample carries.
REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
           "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting")

# A GPU between kernels reports gpu_idle and a pinned clock reports applications_clocks_setting;
# neither means power or heat held the run back, so neither counts as throttling.
NOT_THROTTLING = frozenset({"gpu_idle", "applications_clocks_setting"})

# Reasons that mean power or heat lowered the clocks, with how a flag names them.
LIMITING = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "hardware slowdown",
    "sw_thermal_slowdown": "thermal slowdown",
    "hw_thermal_slowdown": "hardware thermal slowdown",
    "hw_power_brake_slowdown": "power brake",
}

MAX_POINTS = 600          # a record keeps at most this many samples of the series
SM_CLOCK_DROP = 0.05      # the SM clock flag fires past this fall from the run's own maximum

Series = dict[str, list[Any]]


def _downsample_indices(n: int, cap: int) -> list[int]:
    """Evenly spread indices into n items, at most `cap` of them, always the first and the last."""
    if n <= cap:
        return list(range(n))
    if cap < 2:
        return [0]
    step = (n - 1) / (cap - 1)
    # step > 1, so rounded positions are strictly increasing and never repeat.
    return [round(i * step) for i in range(cap)]


def _stats(values: list[Any]) -> dict[str, float] | None:
    known = [float(v) for v in values if v is not None]
    if not known:
        return None
    return {"min": min(known), "median": float(statistics.median(known)), "max": max(known)}


def _pct(share: float) -> str:
    # A reason seen in a handful of samples must not read as "0%".
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


@dataclass
class Telemetry:
    """A run's GPU telemetry over its measured steps.

    `series` is columnar: one list per field of `FIELDS`, plus `t_s` (seconds since recording
    started) and `reasons` (one list of reason names per sample, None where NVML gave none). It
    holds at most MAX_POINTS samples; the figures below are over every sample taken.
    `summary[field]` is {"min", "median", "max"}, or None where the GPU never reported that field.
    `reasons_seen` is sorted and leaves out gpu_idle. `reason_shares[name]` and `throttled_share`
    are fractions of the samples whose reasons are known; throttled means any reason outside
    NOT_THROTTLING. Both are None/empty where reasons were never known.
    """

    series: Series
    summary: dict[str, dict[str, float] | None]
    reasons_seen: list[str]
    reason_shares: dict[str, float]
    throttled_share: float | None
    samples: int
    period_s: float
    index: int = 0

    @classmethod
    def from_samples(cls, samples: list[dict[str, Any]], period_s: float, index: int = 0,
                     max_points: int = MAX_POINTS) -> Telemetry:
        """Build from sample dicts (t_s, the FIELDS and `reasons`); a missing key counts as None."""
        summary = {f: _stats([s.get(f) for s in samples]) for f in FIELDS}
        known = [list(s["reasons"]) for s in samples if s.get("reasons") is not None]
        counts: dict[str, int] = {}
        throttled = 0
        for reasons in known:
            for r in set(reasons):
                counts[r] = counts.get(r, 0) + 1
            throttled += any(r not in NOT_THROTTLING for r in reasons)
        shares = {r: counts[r] / len(known) for r in sorted(counts)}
        keep = _downsample_indices(len(samples), max_points)
        series: Series = {"t_s": [samples[i].get("t_s") for i in keep]}
        for f in FIELDS:
            series[f] = [samples[i].get(f) for i in keep]
        series["reasons"] = [None if samples[i].get("reasons") is None else list(samples[i]["reasons"])
                             for i in keep]
        return cls(series=series, summary=summary,
                   reasons_seen=sorted(r for r in counts if r != "gpu_idle"),
                   reason_shares=shares,
                   throttled_share=throttled / len(known) if known else None,
                   samples=len(samples), period_s=period_s, index=index)

    def gpu_busy_share(self) -> float | None:
        """NVML's utilisation over the measured steps, as a share (0..1) (core.run_summary.nvml_busy_share)."""
        return nvml_busy_share(self.series, self.summary)

    def sm_clock_drop(self) -> tuple[float, float, float] | None:
        """(fraction fallen, max MHz, min MHz) of the SM clock, or None where it was never read.

        The fall is measured against the run's own maximum, not the card's rated boost clock: a
        clock that stayed put at any level is steady, one that sagged below its own peak is not.
        """
        s = self.summary.get("sm_clock_mhz")
        if not s or not s["max"]:
            return None
        return (s["max"] - s["min"]) / s["max"], s["max"], s["min"]

    def flags(self) -> list[str]:
        """Plain-English warnings, empty for a run that held its clocks.

        - "SM clock fell X% (max -> min MHz)" where the lowest SM clock over the samples is more
          than 5% (SM_CLOCK_DROP) below the highest SM clock seen in the same run.
        - "<what> (<reason>) in N% of samples" for each power or thermal reason seen (LIMITING).
        """
        out = []
        drop = self.sm_clock_drop()
        if drop is not None and drop[0] > SM_CLOCK_DROP:
            out.append(f"SM clock fell {drop[0]:.1%} ({drop[1]:.0f} -> {drop[2]:.0f} MHz)")
        for reason, what in LIMITING.items():
            if reason in self.reasons_seen:
                out.append(f"{what} ({reason}) in {_pct(self.reason_shares.get(reason, 0.0))} of samples")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: {"series": {column lists}, "summary": {...}, "flags": [...], and the counts}."""
        return {
            "series": {k: [list(r) if isinstance(r, list) else r for r in v] for k, v in self.series.items()},
            "summary": {k: dict(v) if v else None for k, v in self.summary.items()},
            "flags": self.flags(),
            "reasons_seen": list(self.reasons_seen),
            "reason_shares": dict(self.reason_shares),
            "throttled_share": self.throttled_share,
            "samples": self.samples,
            "period_s": self.period_s,
            "index": self.index,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Telemetry:
        """The inverse of to_dict; flags are recomputed, so a record written before a flag changed
        reads with today's rules."""
        series = {k: list(v) for k, v in d.get("series", {}).items()}
        summary = {f: None for f in FIELDS}
        summary.update({k: dict(v) if v else None for k, v in d.get("summary", {}).items()})
        samples = d.get("samples")
        return cls(series=series, summary=summary,
                   reasons_seen=list(d.get("reasons_seen", [])),
                   reason_shares=dict(d.get("reason_shares", {})),
                   throttled_share=d.get("throttled_share"),
                   samples=int(samples if samples is not None else len(series.get("t_s", []))),
                   period_s=float(d.get("period_s", 0.0)), index=int(d.get("index", 0)))

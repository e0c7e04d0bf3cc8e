"""The GPU telemetry section of a run report, and the one-line warning the CLI and console show."""
from __future__ import annotations

from perfconsole.core.telemetry.gpu_summary import FIELDS, NOT_THROTTLING, Telemetry

LABELS = {
    "sm_clock_mhz": "SM clock",
    "mem_clock_mhz": "memory clock",
    "power_w": "power draw",
    "power_limit_w": "power limit (enforced)",
    "temperature_c": "GPU temperature",
    "gpu_util_pct": "GPU utilisation",
    "mem_util_pct": "memory bandwidth utilisation",
    "memory_used_mib": "memory used",
}


def _n(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.1f}"


def markdown_lines(t: Telemetry) -> list[str]:
    """Table of min/median/max per field, reasons seen, throttled share, and flags as warnings."""
    lines = ["", "## GPU telemetry (measured steps)", "",
             f"{t.samples:,} samples of GPU {t.index}, one every {t.period_s * 1000:,.0f} ms."]
    lines += ["", "| field | unit | min | median | max |", "| --- | --- | --: | --: | --: |"]
    for f, unit in FIELDS.items():
        s = t.summary.get(f)
        lo, mid, hi = (s["min"], s["median"], s["max"]) if s else (None, None, None)
        lines.append(f"| {LABELS[f]} | {unit} | {_n(lo)} | {_n(mid)} | {_n(hi)} |")
    lines.append("")
    if t.throttled_share is None:
        lines.append("Clock-event reasons: not reported by this GPU.")
    else:
        seen = ", ".join(f"`{r}` ({t.reason_shares.get(r, 0.0):.0%})" for r in t.reasons_seen) or "none"
        lines.append(f"Clock-event reasons seen (share of samples; `gpu_idle` left out): {seen}.")
        lines.append(f"Throttled share: {t.throttled_share:.0%} of samples had a reason other than "
                     f"{' or '.join(f'`{r}`' for r in sorted(NOT_THROTTLING))}.")
    flags = t.flags()
    if flags:
        lines.append("")
        lines += [f"- **Warning: {f}.**" for f in flags]
    return lines


def flag_text(t: Telemetry | None) -> str | None:
    """One line for the CLI and console, or None for a run that held its clocks (or has no telemetry)."""
    flags = t.flags() if t is not None else []
    return "GPU throttled: " + "; ".join(flags) if flags else None

"""Speed of light as bars: each phase's measured median as a bar, the part up to its floor filled, so the
filled share of a bar is the phase's fraction of speed of light (a full bar would be a step at the floor)."""
from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from perfconsole.core.flops import beaten_text
from perfconsole.tui.glyphs import UNICODE, Glyphs

PHASES = (("forward_ms", "forward"), ("backward_ms", "backward"), ("optimizer_ms", "optimizer"), ("total_ms", "step"))


def sol_table(sol: dict[str, Any] | None, width: int = 24, glyphs: Glyphs = UNICODE) -> Table | Text:
    """Rows of `phase  [floor bar|rest]  measured ms  floor ms  fraction`, the bars on one scale (the step)."""
    if not sol:
        return Text("speed of light: no peaks measured for this run", style="dim")
    if beaten_text(sol):
        return Text(str(beaten_text(sol)), style="yellow")
    scale = max((sol[k]["measured_ms"] for k, _ in PHASES if k in sol), default=0.0)
    t = Table.grid(padding=(0, 1))
    for col in ("phase", "bar", "measured", "floor", "fraction"):
        t.add_column(justify="left" if col in ("phase", "bar") else "right", no_wrap=True)
    for key, name in PHASES:
        p = sol.get(key)
        if not p or scale <= 0:
            continue
        cells = max(1, round(width * p["measured_ms"] / scale))
        filled = min(cells, round(cells * min(p["fraction"] or 0.0, 1.0)))
        bar = Text(glyphs.full * filled, style="green") + Text(glyphs.empty * (cells - filled), style="yellow")
        t.add_row(name, bar, f"{p['measured_ms']:,.2f} ms", f"floor {p['floor_ms']:,.2f} ms",
                  f"{100 * (p['fraction'] or 0):.1f}%")
    return t


def busy_text(summary: Any) -> str:
    """`GPU busy 87% (profile) gpu-bound`, or that it is not known."""
    if summary is None or summary.gpu_busy_share is None:
        return "GPU busy: not known (CPU run, or no GPU timing)"
    lower = "at least " if summary.gpu_busy_source == "events" else ""
    bound = f", {summary.bound}" if summary.bound else ""
    return f"GPU busy {lower}{100 * summary.gpu_busy_share:.0f}% ({summary.gpu_busy_source}){bound}"

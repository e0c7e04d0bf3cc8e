"""What a window of the timeline says in words: its span, each rank's device busy share and idle gaps, and the
legend of the drawing. Shared by `perfconsole timeline` and the console's Timeline pane."""
from __future__ import annotations

from perfconsole.core.profiling.categories import CATEGORIES
from perfconsole.core.timeline.model import Timeline
from perfconsole.core.timeline.render import LETTERS, time_unit

MIN_GAP_NS = 10_000   # 10 us: shorter idle times between kernels are launch spacing, not waiting


def window_line(t0: int, t1: int, width: int, step: int | None = None, steps: int = 0) -> str:
    what = f"step {step} of {steps}: " if step is not None else ""
    return f"{what}{at(t0, t1 - t0, t1)} ({duration(t1 - t0)}), {duration((t1 - t0) / max(width, 1))} a column"


def at(t: int, span: float, end: int | None = None) -> str:
    """A time (or a time range, with `end`) from the trace's start, in the unit of `span`, to the microsecond."""
    unit, scale = time_unit(span)
    digits = 3 if unit == "ms" else 1
    text = f"{t / scale:,.{digits}f}" + (f"–{end / scale:,.{digits}f}" if end is not None else "")
    return f"{text} {unit}"


def busy_lines(tl: Timeline, rank: int, t0: int, t1: int, min_gap_ns: int = MIN_GAP_NS, top: int = 3) -> list[str]:
    """The device's busy share of the window and its idle gaps of at least min_gap_ns, the longest first."""
    rt = tl.rank(rank)
    share = tl.busy_share(rank, t0, t1)
    gs, ge = tl.gaps(rank, t0, t1, min_gap_ns)
    head = f"r{rank} " if len(tl.ranks) > 1 else ""
    line = (f"{head}{rt.device} busy {share * 100:.1f} % of the window; {len(gs)} idle gap"
            f"{'' if len(gs) == 1 else 's'} of {duration(min_gap_ns)} or more")
    if len(gs):
        idle = int((ge - gs).sum())
        line += f", {duration(idle)} in all"
    out = [line]
    order = sorted(range(len(gs)), key=lambda i: -(int(ge[i]) - int(gs[i])))[:top]
    for i in order:
        out.append(f"  gap {duration(int(ge[i] - gs[i]))} at {at(int(gs[i]), t1 - t0, int(ge[i]))}")
    return out


def legend(ascii_only: bool) -> str:
    if ascii_only:
        return ("kernels: " + " ".join(f"{LETTERS[c]} {c}" for c in CATEGORIES)
                + " (upper case: the column at least half busy); ranges: [name]")
    return "kernels: █ ▓ ▒ ░ the column's busy share (≥75, ≥50, ≥25 %, less), coloured by category; ranges: ├name┤"


def duration(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:,.1f} us"
    return f"{ns:,.0f} ns"

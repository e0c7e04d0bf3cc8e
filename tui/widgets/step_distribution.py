"""Each compared run's measured step times as a box plot on one shared ms axis: whiskers to the fastest
and slowest step, a box from the first to the third quartile, a mark at the median.

Means and intervals say which run is faster; the plots show how: a shifted box, a longer tail, or a
few slow steps that the mean hides. One axis for every run, so lengths compare directly.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.widget import Widget

from perfconsole.core.record import RunRecord
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.grid_chart import chart_glyphs, tick

BOX_STYLE, MEDIAN_STYLE, WHISKER_STYLE = "cyan", "bold yellow", "grey70"
MIN_PLOT_W = 20
N_TICKS = 4


@dataclass(frozen=True)
class Spread:
    n: int
    lo: float
    q1: float
    median: float
    q3: float
    hi: float


def spread(times: list[float]) -> Spread | None:
    """Five-number summary of step times; quartiles interpolate between steps (inclusive method)."""
    if not times:
        return None
    if len(times) == 1:
        v = times[0]
        return Spread(1, v, v, v, v, v)
    q1, med, q3 = statistics.quantiles(times, n=4, method="inclusive")
    return Spread(len(times), min(times), q1, med, q3, max(times))


def run_spread(r: RunRecord) -> Spread | None:
    return spread([s.total_ms for s in r.steps if not s.warmup])


@dataclass(frozen=True)
class BoxGlyphs:
    left: str
    right: str
    whisker: str
    median: str


UNICODE_BOX = BoxGlyphs("├", "┤", "─", "┃")
ASCII_BOX = BoxGlyphs("[", "]", "-", "|")


def distribution_text(runs: list[RunRecord], width: int, glyphs: Glyphs) -> Text:
    """A title, a key, one box plot per run, and the shared axis: 4 + len(runs) lines."""
    cg = chart_glyphs(glyphs)
    bg = ASCII_BOX if glyphs.full.isascii() else UNICODE_BOX
    spreads = [run_spread(r) for r in runs]
    out = Text(no_wrap=True, overflow="crop")
    out.append("Step time distribution (measured steps, total ms)\n", style="bold")
    out.append("  ")
    for ch, style, word in ((bg.left, WHISKER_STYLE, "fastest"), (glyphs.full, BOX_STYLE, "quartiles"),
                            (bg.median, MEDIAN_STYLE, "median"), (bg.right, WHISKER_STYLE, "slowest")):
        out.append(ch, style=style)
        out.append(f" {word}  ", style="dim")
    out.append("\n")
    present = [s for s in spreads if s is not None]
    label_w = len(str(len(runs))) + 1
    stats = [f"median {s.median:,.3f} ms" if s else "no measured steps" for s in spreads]
    stats_w = max(map(len, stats), default=0)
    plot_w = max(MIN_PLOT_W, width - label_w - 1 - stats_w - 1)
    lo = min((s.lo for s in present), default=0.0)
    hi = max((s.hi for s in present), default=1.0)

    def col(v: float) -> int:
        return 0 if hi <= lo else round((v - lo) / (hi - lo) * (plot_w - 1))

    for i, (s, stat) in enumerate(zip(spreads, stats)):
        out.append(f"{i + 1:<{label_w}} ", style="bold")  # runs are numbered from 1 everywhere
        cells: list[tuple[str, str]] = [(" ", "")] * plot_w
        if s is not None:
            a, b, c, d, e = col(s.lo), col(s.q1), col(s.median), col(s.q3), col(s.hi)
            for x in range(a, e + 1):
                cells[x] = (bg.whisker, WHISKER_STYLE)
            cells[a], cells[e] = (bg.left, WHISKER_STYLE), (bg.right, WHISKER_STYLE)
            for x in range(b, d + 1):
                cells[x] = (glyphs.full, BOX_STYLE)
            cells[c] = (bg.median, MEDIAN_STYLE)
        for ch, style in cells:
            out.append(ch, style=style)
        out.append(f" {stat}\n", style="" if s else "dim")
    # The shared axis: a tick at evenly spaced values, labelled in ms.
    xs = [round(k * (plot_w - 1) / (N_TICKS - 1)) for k in range(N_TICKS)]
    axis = [cg.h] * plot_w
    for x in xs:
        axis[x] = cg.xtick
    out.append(" " * label_w + " " + "".join(axis) + "\n", style="dim")
    labels = [" "] * (plot_w + stats_w)
    for x in xs:
        lab = tick(lo + (hi - lo) * x / max(1, plot_w - 1))
        start = max(0, min(len(labels) - len(lab), x - len(lab) // 2))
        labels[start:start + len(lab)] = list(lab)
    out.append(" " * label_w + " " + "".join(labels).rstrip() + " ms", style="dim")
    return out


class StepDistribution(Widget):
    """The compare pane's box plots; as tall as its runs need, as wide as the pane."""
    DEFAULT_CSS = "StepDistribution { height: auto; margin-top: 1; }"

    def __init__(self, glyphs: Glyphs = UNICODE, **kw: Any) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.runs: list[RunRecord] = []

    def show(self, runs: list[RunRecord]) -> None:
        self.runs = list(runs)
        self.display = bool(self.runs)
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return 4 + len(self.runs) if self.runs else 0

    def render(self) -> Text:
        if not self.runs:
            return Text("")
        return distribution_text(self.runs, self.size.width or 78, self.glyphs)

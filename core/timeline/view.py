"""A window onto a timeline that keys move: zoom, pan, the next or previous kernel of a lane, the next or previous
idle gap of the device, a step fitted or picked by number. The console's Timeline pane holds one and draws its
frame; everything here is computed, nothing drawn."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfconsole.core.timeline.model import Kernel, Timeline
from perfconsole.core.timeline.render import Frame, render
from perfconsole.core.timeline.captions import MIN_GAP_NS, at, busy_lines, duration, window_line

MIN_SPAN_NS = 1_000     # zoomed in no further than a microsecond across


@dataclass
class View:
    tl: Timeline
    t0: int = 0
    t1: int = 1
    lane: str = ""                        # the lane n/N move along (a device lane)
    selected: int | None = None           # the selected interval's position in that lane
    gap: tuple[int, int] | None = None    # the idle gap g/G last went to
    step: int | None = None               # the step last fitted
    launches: bool = False

    def __post_init__(self) -> None:
        self.fit_all()
        lanes = self.tl.kernel_lanes()
        self.lane = lanes[0].key if lanes else ""

    @property
    def rank(self) -> int:
        return self.tl.lane(self.lane).rank if self.lane else self.tl.ranks[0].rank

    @property
    def kernel(self) -> Kernel | None:
        return self.tl.kernel(self.lane, self.selected) if self.lane and self.selected is not None else None

    def _focus(self) -> int:
        """The time zoom and steps go by: the selected kernel's start, the gap's, or the window's middle."""
        k = self.kernel
        if k is not None and self.t0 <= k.start < self.t1:
            return k.start
        if self.gap is not None and self.t0 <= self.gap[0] < self.t1:
            return self.gap[0]
        return (self.t0 + self.t1) // 2

    def _show(self, t0: int, t1: int) -> None:
        lo, hi = self.tl.span()
        span = min(max(t1 - t0, MIN_SPAN_NS), max(hi - lo, MIN_SPAN_NS))
        t0 = min(max(t0, lo), max(lo, hi - span))
        self.t0, self.t1 = int(t0), int(t0 + span)

    def _centre(self, t: int, end: int | None = None) -> None:
        """Keep the span, centred on [t, end) where that is out of view."""
        end = t if end is None else end
        if not (self.t0 <= t and end <= self.t1):
            span = self.t1 - self.t0
            self._show((t + end) // 2 - span // 2, (t + end) // 2 - span // 2 + span)

    # --- keys --------------------------------------------------------------------------------------------
    def zoom(self, factor: float) -> None:
        c = self._focus()
        span = (self.t1 - self.t0) * factor
        share = (c - self.t0) / max(self.t1 - self.t0, 1)
        self._show(int(c - span * share), int(c - span * share + span))

    def pan(self, quarters: int) -> None:
        shift = (self.t1 - self.t0) * quarters // 4
        self._show(self.t0 + shift, self.t1 + shift)

    def fit_all(self) -> None:
        self.step = None
        self._show(*self.tl.span())

    def fit_step(self, n: int | None = None) -> None:
        """Step n, or the step around the selection (the first step where none holds it)."""
        rt = self.tl.rank(self.rank)
        if not rt.steps:
            raise ValueError("the trace has no steps (no ProfilerStep or forward ranges)")
        if n is None:
            here = self.tl.step_at(self._focus(), self.rank)
            n = here.index if here is not None else (self.step or 1)
        s = self.tl.step(n, self.rank)
        self.step = n
        self._show(s.start, s.end)

    def next_lane(self, delta: int) -> None:
        keys = [lane.key for lane in self.tl.kernel_lanes()]
        if keys:
            self.lane = keys[(keys.index(self.lane) + delta) % len(keys)] if self.lane in keys else keys[0]
            self.selected = None

    def next_kernel(self, delta: int) -> Kernel | None:
        if not self.lane:
            return None
        k = self.kernel
        ref = k.start if k is not None and self.t0 <= k.start < self.t1 else (self.t0 - 1 if delta > 0 else self.t1)
        pos = self.tl.find(self.lane, ref, forward=delta > 0)
        if pos is None:
            return None
        self.selected, self.gap = pos, None
        k = self.tl.kernel(self.lane, pos)
        self._centre(k.start, min(k.end, k.start + (self.t1 - self.t0) // 2))
        return k

    def next_gap(self, delta: int, min_ns: int = MIN_GAP_NS) -> tuple[int, int] | None:
        lo, hi = self.tl.span(self.rank)
        gs, ge = self.tl.gaps(self.rank, lo, hi, min_ns)
        ref = self.gap[0] if self.gap is not None else (self.kernel.start if self.kernel else self.t0)
        i = int(np.searchsorted(gs, ref, side="right")) if delta > 0 else int(np.searchsorted(gs, ref, "left")) - 1
        if not 0 <= i < len(gs):
            return None
        self.gap = (int(gs[i]), int(ge[i]))
        after = self.tl.find(self.lane, self.gap[1] - 1) if self.lane else None   # the kernel the device waited for
        self.selected = after
        if self.gap[1] - self.gap[0] > self.t1 - self.t0:
            self._show(self.gap[0] - (self.gap[1] - self.gap[0]) // 8, self.gap[1] + (self.gap[1] - self.gap[0]) // 8)
        self._centre(*self.gap)
        return self.gap

    # --- what to draw ------------------------------------------------------------------------------------
    def frame(self, width: int, ascii_only: bool = False) -> Frame:
        sel = (self.lane, self.selected) if self.selected is not None else None
        return render(self.tl, self.t0, self.t1, width, None, ascii_only, self.launches, selected=sel)

    def title(self, width: int) -> str:
        steps = self.tl.rank(self.rank).steps
        fitted = self.step if self.step and (steps[self.step - 1].start, steps[self.step - 1].end) == (self.t0, self.t1) \
            else None
        return window_line(self.t0, self.t1, width, fitted, len(steps))

    def details(self) -> list[str]:
        """The selection (a kernel: its name, then its category, duration, grid and block, and phase; or the gap) and
        the device's busy share."""
        out = []
        k = self.kernel
        span = self.t1 - self.t0
        if self.gap is not None:
            out.append(f"idle gap {duration(self.gap[1] - self.gap[0])} at {at(self.gap[0], span, self.gap[1])}"
                       + (f"; then {k.name}" if k is not None else ""))
        elif k is not None:   # the name on a line of its own: a C++ kernel's runs to hundreds of characters
            dims = f"grid {_xyz(k.grid)} block {_xyz(k.block)} · " if k.grid and k.block else ""
            out += [k.name, f"{k.category} · {duration(k.duration)} at {at(k.start, span)} · {dims}"
                            f"phase: {k.phase or '-'}"]
        else:
            out.append("n/N: next/previous kernel · g/G: next/previous idle gap · f: fit a step · s: go to a step")
        out += busy_lines(self.tl, self.rank, self.t0, self.t1, top=0)
        return out


def _xyz(dims: tuple[int, ...]) -> str:
    """A launch's grid or block as the CUDA triple, "(132,1,1)"."""
    return "(" + ",".join(str(d) for d in dims) + ")"

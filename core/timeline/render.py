"""A window [t0, t1) of a timeline drawn at a width W as text rows: plain data that the CLI prints and the console
styles. A kernel lane's cell shows how busy its column is (Unicode blocks, or the category's letter in ASCII:
upper case at least half busy, lower case less) and which category took most of it (`cats`, for colour); a range
lane writes each range's name across its span where the window holds few enough of them to read, its busy share
where it holds more. Busy time per column comes from the lane's index (prefix sums over sorted starts and ends), so
a row costs O(W log n) at any zoom, and naming ranges O(log n + visible).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfconsole.core.profiling.categories import CATEGORIES
from perfconsole.core.timeline.model import DEVICE_KINDS, LAUNCHES, Lane, Timeline

LETTERS = dict(zip(CATEGORIES, "MASNEROYCX"))   # matmul attention softmax normalization elementwise reduction
                                                  # optimizer memorY Communication other(X)
BLOCKS = ((0.75, "█"), (0.5, "▓"), (0.25, "▒"), (0.0, "░"))
STYLES = {"matmul": "bright_blue", "attention": "magenta", "softmax": "bright_magenta", "normalization": "cyan",
          "elementwise": "green", "reduction": "bright_green", "optimizer": "yellow", "memory": "bright_red",
          "communication": "red", "other": "white", "range": "bright_white", "launch": "bright_black"}
RANGE = "range"
LAUNCH = "launch"


@dataclass(frozen=True)
class Row:
    lane: str                         # the lane's key
    label: str
    text: str                         # exactly `width` characters
    cats: tuple[str, ...]             # per cell: a category, "range", "launch", or "" where idle
    selected: tuple[int, int] | None = None   # the cells [a, b) of the selected interval


@dataclass(frozen=True)
class Frame:
    t0: int
    t1: int
    width: int
    rows: list[Row]
    axis: str                         # tick labels under the rows, `width` characters
    unit: str                         # "ms" or "us": the axis's unit

    @property
    def ns_per_cell(self) -> float:
        return (self.t1 - self.t0) / self.width

    def lines(self) -> list[str]:
        """The frame as plain text: each row's label, padded, then its cells; the axis last."""
        w = max([len(r.label) for r in self.rows] + [len(self.unit) + 4])
        return [f"{r.label:<{w}} {r.text}" for r in self.rows] + [f"{'t (' + self.unit + ')':<{w}} {self.axis}"]


def render(tl: Timeline, t0: int, t1: int, width: int, rank: int | None = None, ascii_only: bool = False,
           launches: bool = False, max_depth: int = 4, selected: tuple[str, int] | None = None) -> Frame:
    """The rows of every lane of `rank` (every rank where None) over [t0, t1) at `width` cells."""
    width = max(1, int(width))
    t1 = max(t1, t0 + width)          # a cell is at least a nanosecond wide
    edges = t0 + np.floor(np.arange(width + 1) * ((t1 - t0) / width)).astype(np.int64)
    edges[-1] = t1
    rows = []
    many_ranks = rank is None and len(tl.ranks) > 1
    for lane in tl.lanes_of(rank, launches):
        if lane.depth >= max_depth:
            continue
        label = f"r{lane.rank} {lane.label}" if many_ranks else lane.label
        sel = selected[1] if selected is not None and selected[0] == lane.key else None
        if lane.kind in DEVICE_KINDS:
            text, cats = _busy_cells(lane, edges, ascii_only)
        elif lane.kind != LAUNCHES and lane.index.count(t0, t1) <= 2 * width:
            text, cats = _named_cells(tl, lane, edges, ascii_only)
        else:
            text, cats = _busy_cells(lane, edges, ascii_only, LAUNCH if lane.kind == LAUNCHES else RANGE)
        rows.append(Row(lane.key, label, text, cats, _cells(lane, sel, edges) if sel is not None else None))
    unit, axis = _axis(edges, width)
    return Frame(t0, t1, width, rows, axis, unit)


def _busy_cells(lane: Lane, edges: np.ndarray, ascii_only: bool, fixed: str = "") -> tuple[str, tuple[str, ...]]:
    busy = lane.index.coverage(edges)
    share = busy / np.maximum(np.diff(edges), 1)
    if fixed:
        cats = [fixed] * len(share)
    else:
        codes = lane.present_categories()
        per = np.stack([lane.category_index(c).coverage(edges) for c in codes]) if codes else None
        top = [CATEGORIES[codes[i]] for i in np.argmax(per, axis=0)] if per is not None else ["other"] * len(share)
        cats = top
    chars, out_cats = [], []
    for f, cat in zip(share.tolist(), cats):
        if f <= 0:
            chars.append(" ")
            out_cats.append("")
            continue
        if ascii_only:
            letter = LETTERS.get(cat, "#" if cat == RANGE else ":")
            chars.append(letter.upper() if f >= 0.5 else letter.lower())
        else:
            chars.append(next(ch for lim, ch in BLOCKS if f >= lim))
        out_cats.append(cat)
    return "".join(chars), tuple(out_cats)


def _named_cells(tl: Timeline, lane: Lane, edges: np.ndarray, ascii_only: bool) -> tuple[str, tuple[str, ...]]:
    width = len(edges) - 1
    t0, t1 = int(edges[0]), int(edges[-1])
    chars = [" "] * width
    cats = [""] * width
    fill, left, right = ("-", "[", "]") if ascii_only else ("─", "├", "┤")
    for pos in lane.index.window(t0, t1).tolist():
        s, e = int(lane.index.starts[pos]), int(lane.index.ends[pos])
        a, b = _cell_span(edges, s, e)
        name = tl.names[int(lane.names[pos])]
        body = list((name + fill * width)[:b - a])
        if b - a >= 3:
            body = ([left] if s >= t0 else []) + list((name + fill * width)[:b - a - (s >= t0) - (e <= t1)]) \
                + ([right] if e <= t1 else [])
        elif b - a == 1:
            body = ["|" if ascii_only else "│"]
        chars[a:b] = body[:b - a]
        cats[a:b] = [RANGE] * (b - a)
    return "".join(chars), tuple(cats)


def _cell_span(edges: np.ndarray, s: int, e: int) -> tuple[int, int]:
    """The cells [a, b) an interval [s, e) touches (at least one)."""
    width = len(edges) - 1
    a = max(0, min(width - 1, int(np.searchsorted(edges, s, side="right")) - 1))
    b = max(a + 1, min(width, int(np.searchsorted(edges, e, side="left"))))
    return a, b


def _cells(lane: Lane, position: int, edges: np.ndarray) -> tuple[int, int] | None:
    s, e = int(lane.index.starts[position]), int(lane.index.ends[position])
    if e < edges[0] or s >= edges[-1]:
        return None
    return _cell_span(edges, s, e)


def time_unit(span_ns: float) -> tuple[str, float]:
    """The unit that shows a span readably: ("ms", 1e6) from a millisecond up, else ("us", 1e3)."""
    return ("ms", 1e6) if span_ns >= 1e6 else ("us", 1e3)


def format_time(ns: float, span_ns: float) -> str:
    """A time in the unit of `span_ns`, with the decimals its ticks need (an axis tick, a window's ends)."""
    unit, scale = time_unit(span_ns)
    digits = max(0, min(3, 2 - math.floor(math.log10(max(span_ns / scale, 1e-9)))))
    return f"{ns / scale:,.{digits}f}"


def _axis(edges: np.ndarray, width: int) -> tuple[str, str]:
    span = float(edges[-1] - edges[0])
    unit, _ = time_unit(span)
    axis = [" "] * width
    step = max(10, len(format_time(float(edges[-1]), span)) + 3)
    for col in range(0, width, step):
        label = "|" + format_time(float(edges[col]), span)
        if col + len(label) <= width:
            axis[col:col + len(label)] = label
    return unit, "".join(axis)

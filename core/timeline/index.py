"""An interval index: a lane's intervals sorted by start, so that a window costs O(log n + visible), not a scan.

Intervals are integer nanoseconds (int64, from the timeline's origin). `window(t0, t1)` finds the intervals that
overlap [t0, t1) with two binary searches: the first interval whose running maximum end passes t0, and the first
start at or after t1. `coverage(edges)` gives the busy time of every column of a drawing from prefix sums of the
sorted starts and ends, in O(W log n) however many intervals the window holds; it sums overlapping intervals (a
stream's kernels do not overlap; a lane of ranges is drawn by depth, each depth a lane of its own). Sums are int64:
exact for a million intervals over a trace of up to about 2.5 hours.
"""
from __future__ import annotations

import numpy as np


class IntervalIndex:
    """Intervals [start, end) sorted by start (ties by the order given); `order` maps back to the input's order."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.maximum(np.asarray(ends, dtype=np.int64), starts)
        self.order = np.argsort(starts, kind="stable")
        self.starts = starts[self.order]
        self.ends = ends[self.order]
        # the running maximum end is sorted: the first interval that can reach past t0 is one binary search away
        self.reach = np.maximum.accumulate(self.ends) if len(self.ends) else self.ends
        self.sorted_ends = np.sort(self.ends)
        self._start_sums = np.concatenate(([0], np.cumsum(self.starts)))
        self._end_sums = np.concatenate(([0], np.cumsum(self.sorted_ends)))

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def span(self) -> tuple[int, int] | None:
        """(first start, last end), or None for an empty lane."""
        return (int(self.starts[0]), int(self.reach[-1])) if len(self.starts) else None

    def window(self, t0: int, t1: int) -> np.ndarray:
        """Positions (in start order) of the intervals that overlap [t0, t1), ascending."""
        lo = int(np.searchsorted(self.reach, t0, side="right"))
        hi = int(np.searchsorted(self.starts, t1, side="left"))
        if hi <= lo:
            return np.empty(0, dtype=np.int64)
        pos = np.arange(lo, hi, dtype=np.int64)
        # an interval nested inside a long one may end before t0 although the running maximum passed it
        return pos[self.ends[lo:hi] > t0]

    def count(self, t0: int, t1: int) -> int:
        """At most how many intervals overlap [t0, t1): the candidates of `window`, without filtering them."""
        lo = int(np.searchsorted(self.reach, t0, side="right"))
        return max(0, int(np.searchsorted(self.starts, t1, side="left")) - lo)

    def busy_before(self, x: np.ndarray) -> np.ndarray:
        """For each time in x: the sum over intervals of their length before it (int64 ns)."""
        x = np.asarray(x, dtype=np.int64)
        n_s = np.searchsorted(self.starts, x, side="left")
        n_e = np.searchsorted(self.sorted_ends, x, side="left")
        return (n_s * x - self._start_sums[n_s]) - (n_e * x - self._end_sums[n_e])

    def coverage(self, edges: np.ndarray) -> np.ndarray:
        """Busy time inside each column [edges[i], edges[i+1]) (len(edges) - 1 values, int64 ns)."""
        return np.diff(self.busy_before(edges))

    def next_start(self, t: int) -> int | None:
        """The position of the first interval that starts after t, or None."""
        i = int(np.searchsorted(self.starts, t, side="right"))
        return i if i < len(self.starts) else None

    def previous_start(self, t: int) -> int | None:
        """The position of the last interval that starts before t, or None."""
        i = int(np.searchsorted(self.starts, t, side="left")) - 1
        return i if i >= 0 else None

    def at(self, t: int) -> int | None:
        """The position of the interval that holds t (the latest-starting one where several do), or None."""
        hits = self.window(t, t + 1)
        return int(hits[-1]) if len(hits) else None


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The merged, disjoint intervals covering the same points (touching ones joined), sorted."""
    if len(starts) == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, dtype=np.int64)[order], np.asarray(ends, dtype=np.int64)[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(s) - 1)
    return s[first], reach[last]

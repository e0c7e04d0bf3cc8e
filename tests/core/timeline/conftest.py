"""What the timeline's tests compute for themselves from a capture's own events, to hold the timeline to."""
from __future__ import annotations

import pytest


def merge(intervals) -> list[list[float]]:
    """The union of (start, end) intervals, as sorted disjoint [start, end] pairs (touching ones merged)."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


@pytest.fixture
def merged():
    return merge

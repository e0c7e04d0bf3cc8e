"""The interval index against brute force: windows, per-column busy time, unions; nested and overlapping
intervals included (range lanes nest, a running maximum of ends must still find a short one after a long one)."""
from __future__ import annotations

import numpy as np
import pytest

from perfconsole.core.timeline.index import IntervalIndex, union


def _random(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 100_000, n)
    lengths = np.where(rng.random(n) < 0.05, rng.integers(5_000, 40_000, n), rng.integers(0, 300, n))
    return starts, starts + lengths


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_window_finds_exactly_the_intervals_that_overlap_it(seed):
    starts, ends = _random(3_000, seed)
    index = IntervalIndex(starts, ends)
    rng = np.random.default_rng(seed + 10)
    for _ in range(200):
        t0 = int(rng.integers(-1_000, 110_000))
        t1 = t0 + int(rng.integers(1, 20_000))
        got = sorted(index.order[index.window(t0, t1)].tolist())
        want = [i for i in range(len(starts)) if starts[i] < t1 and max(ends[i], starts[i]) > t0]
        assert got == want
        assert index.count(t0, t1) >= len(want)


@pytest.mark.parametrize("seed", [3, 4])
def test_the_busy_time_of_each_column_is_the_sum_of_the_intervals_clipped_to_it(seed):
    starts, ends = _random(500, seed)
    index = IntervalIndex(starts, ends)
    edges = np.array([0, 7, 1_000, 1_001, 25_000, 50_000, 99_999, 140_000])
    want = [sum(max(0, min(e, b) - max(s, a)) for s, e in zip(starts.tolist(), ends.tolist()))
            for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]
    assert index.coverage(edges).tolist() == want


def test_the_union_merges_overlapping_and_touching_intervals():
    s, e = union(np.array([50, 0, 10, 30, 31, 100]), np.array([60, 10, 20, 35, 32, 100]))
    assert list(zip(s.tolist(), e.tolist())) == [(0, 20), (30, 35), (50, 60), (100, 100)]


def test_next_previous_and_at():
    index = IntervalIndex(np.array([30, 10, 20]), np.array([35, 15, 100]))
    assert index.starts.tolist() == [10, 20, 30]
    assert index.next_start(10) == 1 and index.next_start(30) is None
    assert index.previous_start(20) == 0 and index.previous_start(10) is None
    assert index.at(32) == 2 and index.at(50) == 1 and index.at(17) is None
    assert IntervalIndex(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).span is None

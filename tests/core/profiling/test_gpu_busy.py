"""The GPU's busy time from a torch.profiler trace: the union of kernel, copy and memset intervals."""
from __future__ import annotations

import json

import pytest

from perfconsole.core.profiling.torch_trace import gpu_busy_ms


def _trace(*spans, cat="kernel"):
    return json.dumps({"traceEvents": [{"ph": "X", "cat": c, "name": "k", "ts": ts, "dur": dur}
                                       for ts, dur, c in [(s[0], s[1], s[2] if len(s) > 2 else cat) for s in spans]]})


def test_overlaps_count_once_and_gaps_do_not_count():
    # [0, 100) and [50, 150) overlap on two streams; [300, 400) after a gap; a CPU op is not GPU time.
    text = _trace((0, 100), (50, 100), (300, 100, "gpu_memcpy"), (120, 10, "gpu_memset"), (0, 1000, "cpu_op"))
    assert gpu_busy_ms(text) == pytest.approx(0.25)  # 150 + 100 microseconds


def test_no_gpu_activity_or_no_trace_is_unknown():
    assert gpu_busy_ms(_trace((0, 10, "cpu_op"))) is None
    assert gpu_busy_ms("{not json") is None
    assert gpu_busy_ms(json.dumps([1, 2])) is None

import math

import pytest

from perfconsole.core.flops import forward_flops, peak_tflops, step_flops
from perfconsole.core.reports.compare import speedup_text
from perfconsole.core.stats import interval_text, ratio_text, speedup, summarize


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert s.std == pytest.approx(1.2909944, rel=1e-6)
    # The interval is a t-interval of the mean of log times, mapped back: log 1..4 have mean 0.794513 and
    # std 0.601168; t(0.975, 3 dof) = 3.182, sqrt(4) = 2.
    half = 3.182 * 0.601168 / 2
    assert (s.ci95_low, s.ci95_high) == pytest.approx((math.exp(0.794513 - half), math.exp(0.794513 + half)), rel=1e-5)


def test_a_short_skewed_run_has_a_positive_interval():
    # Three CPU steps, one of them slow: the arithmetic t-interval of the mean was [-2,895, 5,101] ms.
    steps = [152.4, 160.1, 3018.0]
    s = summarize(steps)
    assert s.mean - 4.303 * s.std / math.sqrt(3) < 0          # what the old interval did
    assert 0 < s.ci95_low < s.median < s.ci95_high
    assert interval_text(s.ci95_low, s.ci95_high) == f"[{s.ci95_low:,.3f}, {s.ci95_high:,.3f}]"
    assert interval_text(None, None) == "-"
    # A zero has no log: the arithmetic interval, held within [min, max] where the mean lies.
    z = summarize([0.0, 0.0, 9.0])
    assert z.ci95_low == 0.0 and z.ci95_high == 9.0


def test_a_noisy_ratio_has_a_positive_interval_and_a_slowdown_is_said_as_one():
    base = summarize([10.0, 10.5, 9.5, 10.2])
    noisy = summarize([20.0, 95.0, 30.0, 48.0])   # the delta method's linear interval reaches below zero here
    sp = speedup(base, noisy)
    assert 0 < sp.ci95_low < sp.ratio < sp.ci95_high
    assert sp.ci95_low * sp.ci95_high == pytest.approx(sp.ratio ** 2)   # symmetric in log(ratio)
    assert ratio_text(1 / 4.8) == "4.80x slower" and ratio_text(1.3) == "1.30x faster"
    slow = speedup(summarize([10.0, 10.1, 9.9, 10.0]), summarize([48.0, 48.5, 47.5, 48.0]))
    text = speedup_text(slow)
    assert text.startswith("4.80x slower (95% CI [") and "0.21" not in text
    low, high = (float(x) for x in text[text.index("[") + 1:text.index("]")].split(", "))
    assert low < 4.80 < high                                   # the slowdown's interval bounds the slowdown
    fast = speedup_text(speedup(summarize([13.0, 13.1, 12.9]), summarize([10.0, 10.1, 9.9])))
    assert fast.startswith("1.30x faster (95% CI [")
    assert speedup_text(speedup(summarize([10.0]), summarize([5.0]))) == "2.00x faster (too few steps for an interval)"


def test_single_value_has_no_interval():
    s = summarize([5.0])
    assert s.std == 0.0 and s.ci95_low is None and s.ci95_high is None


def test_speedup_significance():
    fast = summarize([10.0, 10.1, 9.9, 10.0, 10.05])
    slow = summarize([20.0, 20.2, 19.8, 20.1, 19.9])
    sp = speedup(slow, fast)
    assert sp.ratio == pytest.approx(2.0, rel=1e-2) and sp.significant
    same = speedup(summarize([10.0, 11.0, 9.0]), summarize([10.2, 9.1, 10.9]))
    assert not same.significant


def test_flops_of_small_model():
    # 2 * tokens * params_matmul + attention; small, batch 4, ctx 512
    tokens = 4 * 512
    dense = 2 * tokens * (12 * (4 * 768**2 + 3 * 768 * 3072) + 768 * 10000)
    attn = 12 * 2 * 2 * 4 * 512 * 512 * 768
    assert forward_flops(768, 3072, 12, 10000, 4, 512) == dense + attn
    assert step_flops("train", 768, 3072, 12, 10000, 4, 512) == 3 * (dense + attn)


def test_peak_table_prefers_the_longest_name():
    assert peak_tflops("NVIDIA H100 80GB HBM3", "bf16", False) == 989.4
    assert peak_tflops("NVIDIA H100 PCIe", "bf16", False) == 756.0
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp32", True) == 494.7
    assert peak_tflops("NVIDIA H100 80GB HBM3", "fp32", False) == 66.9
    assert peak_tflops("Unknown GPU", "bf16", False) is None
    assert peak_tflops(None, "bf16", False) is None

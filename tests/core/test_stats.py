
import pytest

from perfconsole.core.flops import forward_flops, peak_tflops, step_flops
from perfconsole.core.stats import speedup, summarize


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert s.std == pytest.approx(1.2909944, rel=1e-6)
    half = 3.182 * s.std / 2  # t(0.975, 3 dof) * s / sqrt(4)
    assert (s.ci95_low, s.ci95_high) == pytest.approx((2.5 - half, 2.5 + half))


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

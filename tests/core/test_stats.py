import math
import random

import pytest

from perfconsole.core.flops import forward_flops, peak_tflops, step_flops
from perfconsole.core.reports.compare import speedup_text
from perfconsole.core.stats import (MEDIAN_CI_MIN_N, Stat, interval_text, median_interval_text, median_rank, ratio_text,
                                    speedup, summarize)


def test_summarize_known_values():
    s = summarize([1.0, 2.0, 3.0, 4.0])
    assert (s.n, s.mean, s.median, s.min, s.max) == (4, 2.5, 2.5, 1.0, 4.0)
    assert s.std == pytest.approx(1.2909944, rel=1e-6)


def test_the_interval_is_the_medians_and_lies_inside_the_data():
    # Nine values: the 2nd smallest and the 2nd largest hold the median with 1 - 2 * 10 / 512 = 96.1 %.
    s = summarize([5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0])
    assert (s.median, s.ci95_low, s.ci95_high, s.ci95_of) == (5.0, 2.0, 8.0, "median")
    assert median_interval_text(s) == "[2.000, 8.000]"
    # A slow first step and a stall: the interval leans nowhere past the values, whatever their skew.
    rng = random.Random(59)
    for n in range(6, 80):
        values = [rng.lognormvariate(4, 1.5) for _ in range(n)]
        st = summarize(values)
        assert st.min <= st.ci95_low <= st.median <= st.ci95_high <= st.max, n


def test_the_ranks_are_the_binomials():
    def below(n: int) -> list[int]:   # [2**n * P(Binomial(n, 1/2) < j) for j = 0..n+1]
        out, term = [0], 1
        for i in range(n + 1):
            out.append(out[-1] + term)
            term = term * (n - i) // (i + 1)
        return out

    def exact(n: int) -> int:   # the largest j with P(B < j) <= 2.5 %
        cum = below(n)
        return max(j for j in range(n + 2) if cum[j] * 40 <= 2 ** n)

    assert [exact(n) for n in range(1, 10)] == [0, 0, 0, 0, 0, 1, 1, 1, 2]
    for n in range(1, 400):
        assert median_rank(n) == exact(n), n
    for n in (2001, 2500, 5000):   # the normal approximation: never narrower than the exact count, one rank at most
        assert exact(n) - 1 <= median_rank(n) <= exact(n), n


def test_the_interval_holds_the_median_95_times_in_100():
    rng = random.Random(1)
    for n in (6, 9, 20):
        # lognormal(0, 1): skewed like step times, its median is exactly 1
        hits = sum(s.ci95_low <= 1.0 <= s.ci95_high
                   for s in (summarize([rng.lognormvariate(0, 1) for _ in range(n)]) for _ in range(2000)))
        assert hits / 2000 >= 0.94, (n, hits)


def test_too_few_steps_have_no_interval_and_say_so():
    # `run --steps 3` on the CPU printed mean 576.648 and max 1,059.510 ms beside "95% CI [2.848, 28,422.306]":
    # an interval of the geometric mean, beside the mean, ten thousand times the smallest step.
    s = summarize([96.7, 573.7, 1059.5])
    assert (s.ci95_low, s.ci95_high) == (None, None) and s.too_few
    assert median_interval_text(s) == "too few steps" and median_interval_text(s, of="processes") == "too few processes"
    for n in range(2, MEDIAN_CI_MIN_N):
        assert summarize([float(v) for v in range(1, n + 1)]).too_few, n
    six = summarize([3.0, 1.0, 6.0, 2.0, 5.0, 4.0])   # from six on, min and max hold the median 96.9 % of the time
    assert (six.ci95_low, six.ci95_high) == (1.0, 6.0) and not six.too_few
    one = summarize([5.0])   # one value has no spread: "-", as for its std
    assert not one.too_few and median_interval_text(one) == "-"
    assert interval_text(None, None) == "-"


def test_an_older_stat_loads_without_its_interval_of_the_geometric_mean():
    saved = {"n": 8, "mean": 10.0, "std": 1.0, "median": 9.5, "min": 9.0, "max": 13.0,
             "ci95_low": 9.1, "ci95_high": 11.2}   # as records were saved before the interval was the median's
    s = Stat.from_dict(saved)
    assert (s.ci95_low, s.ci95_high, s.ci95_of) == (None, None, None)
    assert median_interval_text(s) == "-" and not s.too_few
    assert Stat.from_dict(summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).to_dict()).ci95_of == "median"


def test_two_values_a_side_are_too_few_for_a_speedup_interval():
    # `compare --repeat 2` on the CPU: "no significant difference (1.09x, 95% CI [0.00, 1858.54])", an interval
    # from Student's 12.706 on one degree of freedom, a thousand times the ratio of any two processes.
    sp = speedup(summarize([300.0, 480.0]), summarize([260.0, 455.0]))
    assert math.isnan(sp.ci95_low) and not sp.significant and sp.n == 2
    assert speedup_text(sp, "processes") == "1.09x faster (too few processes for an interval: 2 a side, 3 needed)"
    three = speedup(summarize([300.0, 480.0, 390.0]), summarize([260.0, 455.0, 350.0]))
    assert three.n == 3 and 0 < three.ci95_low < three.ratio < three.ci95_high


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
    assert (speedup_text(speedup(summarize([10.0]), summarize([5.0])))
            == "2.00x faster (too few steps for an interval: 1 a side, 3 needed)")


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

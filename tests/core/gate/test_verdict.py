"""The gate's verdict on fixed samples: the interval against ±threshold, which way is worse, the samples an
inconclusive interval would need, thresholds and budgets as typed, and the exit code of each verdict."""
from __future__ import annotations

import math

import pytest

from perfconsole.core.gate.record import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_PASS, EXIT_REGRESSION, GateRecord
from perfconsole.core.gate.runner import Budget
from perfconsole.core.gate.verdict import MetricVerdict, Threshold, classify, judge, parse_threshold, samples_needed

PCT3 = Threshold(0.03, True)


def ratios(*rs: float, a: float = 10.0) -> list[tuple[float, float]]:
    return [(a, a * r) for r in rs]


@pytest.mark.parametrize("low, high, verdict", [
    (1.05, 1.09, "regression"), (0.90, 0.96, "improved"), (0.98, 1.02, "same"), (0.97, 1.03, "same"),
    (1.01, 1.05, "inconclusive"), (0.95, 1.01, "inconclusive"), (0.90, 1.10, "inconclusive")])
def test_the_interval_decides_against_the_threshold_band(low, high, verdict):
    assert classify(low, high, 0.97, 1.03, higher_is_better=False) == verdict


def test_more_is_better_turns_the_directions_round():
    assert classify(1.05, 1.09, 0.97, 1.03, higher_is_better=True) == "improved"
    assert classify(0.90, 0.96, 0.97, 1.03, higher_is_better=True) == "regression"
    v = judge("tokens_per_s", "tokens/s", ratios(0.90, 0.91, 0.89, 0.90), PCT3, higher_is_better=True)
    assert v.verdict == "regression" and v.estimate == pytest.approx(0.90, rel=0.01)


def test_a_tenth_slower_in_every_round_is_a_regression_with_its_log_ratio_interval():
    v = judge("step time", "ms", ratios(1.09, 1.11, 1.10, 1.12, 1.08), PCT3)
    logs = [math.log(r) for r in (1.09, 1.11, 1.10, 1.12, 1.08)]
    mean = sum(logs) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 4)
    assert v.verdict == "regression" and v.n == 5
    assert v.estimate == pytest.approx(math.exp(mean))
    assert (v.low, v.high) == pytest.approx((math.exp(mean - 2.776 * sd / math.sqrt(5)), math.exp(mean + 2.776 * sd / math.sqrt(5))))
    assert v.more_needed is None and "1.100x [" in v.change_text()


def test_the_same_program_twice_is_same_and_a_faster_one_improved():
    assert judge("step time", "ms", ratios(1.00, 1.01, 0.99, 1.00), PCT3).verdict == "same"
    assert judge("step time", "ms", ratios(0.80, 0.82, 0.81), PCT3).verdict == "improved"


def test_a_straddling_interval_is_inconclusive_and_says_how_many_more_samples_would_decide_it():
    v = judge("step time", "ms", ratios(1.00, 1.06, 0.96, 1.02), PCT3)
    assert v.verdict == "inconclusive" and v.more_needed is not None and v.more_needed > 0
    # that many samples with the same spread would shrink the interval past the nearest edge
    logs = [math.log(r) for r in (1.00, 1.06, 0.96, 1.02)]
    center = sum(logs) / 4
    sd = math.sqrt(sum((x - center) ** 2 for x in logs) / 3)
    n = samples_needed(center, sd, math.log(0.97), math.log(1.03))
    assert n == 4 + v.more_needed
    from perfconsole.core.stats import t_quantile_975
    assert t_quantile_975(n - 1) * sd / math.sqrt(n) <= min(math.log(1.03) - center, center - math.log(0.97))
    assert t_quantile_975(n - 2) * sd / math.sqrt(n - 1) > min(math.log(1.03) - center, center - math.log(0.97))


def test_an_estimate_on_an_edge_gets_no_estimate_of_samples():
    assert samples_needed(math.log(1.03), 0.05, math.log(0.97), math.log(1.03)) is None


def test_too_few_samples_and_nothing_measured():
    few = judge("step time", "ms", ratios(1.2, 1.2), PCT3)
    assert few.verdict == "inconclusive" and few.low is None and "too few" in few.note and few.more_needed == 1
    none = judge("peak allocated", "MiB", [(None, None)] * 4, Threshold(64, False))
    assert none.verdict == "unmeasured" and none.estimate is None


def test_memory_in_mib_is_judged_on_the_difference():
    mib = Threshold(64, False)
    assert judge("peak allocated", "MiB", [(1000.0, 1200.0)] * 3, mib).verdict == "regression"
    same = judge("peak allocated", "MiB", [(1000.0, 1010.0)] * 3, mib)
    assert same.verdict == "same" and same.estimate == pytest.approx(10.0) and same.change_text().startswith("+10.0 MiB")
    assert judge("peak reserved", "MiB", [(1000.0, 1000.0), (1000.0, 1100.0), (1000.0, 1000.0)], mib).verdict == "inconclusive"


def test_the_median_method_is_not_widened_by_a_few_outlying_pairs():
    pairs = ratios(*([1.10] * 20 + [1.09, 1.11] * 5 + [0.2, 6.0]))
    t = judge("step time", "ms", pairs, PCT3)
    m = judge("step time", "ms", pairs, PCT3, method="median")
    assert t.verdict == "inconclusive" and m.verdict == "regression" and m.estimate == pytest.approx(1.10)
    assert judge("step time", "ms", ratios(1.1, 1.1, 1.1, 1.1, 1.1), PCT3, method="median").low is None  # 5 < 6


@pytest.mark.parametrize("text, want", [("3%", Threshold(0.03, True)), ("0.5 %", Threshold(0.005, True)),
                                        ("64MiB", Threshold(64, False)), ("64", Threshold(64, False))])
def test_thresholds_as_typed(text, want):
    assert parse_threshold(text, "--memory-threshold", ("MiB",)) == want


@pytest.mark.parametrize("text", ["64MiB", "3", "x%", "-3%"])
def test_a_time_threshold_is_a_percentage(text):
    with pytest.raises(ValueError, match="--threshold: give a percentage"):
        parse_threshold(text, "--threshold")


def test_budgets_in_seconds_or_processes():
    assert Budget.parse("60s") == Budget(seconds=60) and Budget.parse("2m") == Budget(seconds=120)
    assert Budget.parse("8") == Budget(processes=8) and Budget.parse("8").text() == "8 processes"
    for bad in ("2", "8.5", "soon", "60h"):
        with pytest.raises(ValueError, match="--budget"):
            Budget.parse(bad)


def record(*verdicts: str, stopped: str = "decided") -> GateRecord:
    vs = [MetricVerdict(f"m{i}", "ms", False, PCT3, 1.0, 1.0, 1.0, 0.99, 1.01, 3, v) for i, v in enumerate(verdicts)]
    return GateRecord("processes", [{"label": "A"}, {"label": "B"}], [], vs, 3, 1.0, "55s", stopped)


@pytest.mark.parametrize("verdicts, stopped, overall, code", [
    (("same", "unmeasured"), "decided", "same", EXIT_PASS), (("improved", "same"), "decided", "improved", EXIT_PASS),
    (("same", "regression", "inconclusive"), "budget", "regression", EXIT_REGRESSION),
    (("same", "inconclusive"), "budget", "inconclusive", EXIT_INCONCLUSIVE),
    (("same",), "failed", "failed", EXIT_FAILED), (("same",), "cancelled", "failed", EXIT_FAILED)])
def test_exit_codes(verdicts, stopped, overall, code):
    g = record(*verdicts, stopped=stopped)
    assert g.verdict == overall and g.exit_code() == code
    assert (EXIT_PASS, EXIT_REGRESSION, EXIT_INCONCLUSIVE) == (0, 1, 3)
    if overall == "inconclusive":
        assert g.exit_code(inconclusive=0) == 0

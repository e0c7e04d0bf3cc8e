"""The Live pane's statistics: a spread is shown only where there is one."""
from __future__ import annotations

from console_helpers import plain

from perfconsole.core import events as ev
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.tui.widgets.stats_panel import StatsPanel


def _rows(times: list[float]) -> dict[str, str]:
    """The panel's rows, label -> value (labels are the bold left column, one or two words)."""
    r = RunRecord(RunSpec(size="tiny", device="cpu", steps=len(times)))
    for i, t in enumerate(times):
        r.apply(ev.Step(i, False, t, t / 2, t / 4, t / 4))
    panel = StatsPanel()
    panel.show(r.recompute_summary())
    rows = {}
    for line in plain(panel.content).splitlines():
        words = line.split()
        if words:
            two = words[1] in ("CI",)  # "median CI"
            rows[" ".join(words[:2]) if two else words[0]] = " ".join(words[2:] if two else words[1:])
    return rows


def test_one_step_has_no_std_and_no_interval():
    rows = _rows([12.5])
    assert rows["steps"] == "1" and rows["mean"] == "12.500 ms"
    assert rows["std"] == "-" and rows["median CI"] == "-"


def test_two_steps_have_a_spread_and_too_few_for_an_interval():
    # After two steps the pane read "95% CI [6.27, 6,521.04]" beside the mean, the steps 1,141 ms apart.
    rows = _rows([12.0, 13.0])
    assert rows["std"] == "0.707 ms" and rows["median CI"] == "too few steps"


def test_six_steps_have_the_median_s_interval_inside_them():
    rows = _rows([12.0, 13.0, 11.0, 40.0, 12.5, 12.2])
    assert rows["median"] == "12.350 ms" and rows["median CI"] == "[11.00, 40.00]"

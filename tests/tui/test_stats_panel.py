"""The Live pane's statistics: a spread is shown only where there is one."""
from __future__ import annotations

from console_helpers import plain

from perfconsole.core import events as ev
from perfconsole.core.record import RunRecord
from perfconsole.core.spec import RunSpec
from perfconsole.tui.widgets.stats_panel import StatsPanel


def _rows(times: list[float]) -> dict[str, str]:
    r = RunRecord(RunSpec(size="tiny", device="cpu", steps=len(times)))
    for i, t in enumerate(times):
        r.apply(ev.Step(i, False, t, t / 2, t / 4, t / 4))
    panel = StatsPanel()
    panel.show(r.recompute_summary())
    return {line.split()[0]: " ".join(line.split()[1:]) for line in plain(panel.content).splitlines() if line.split()}


def test_one_step_has_no_std_and_no_interval():
    rows = _rows([12.5])
    assert rows["steps"] == "1" and rows["mean"] == "12.500 ms"
    assert rows["std"] == "-" and rows["95%"] == "CI -"


def test_two_steps_have_both():
    rows = _rows([12.0, 13.0])
    assert rows["std"] == "0.707 ms" and rows["95%"].startswith("CI [")

"""A saved gate opens in the Compare pane: its two runs side by side, the verdict and each metric's interval
above them (snapshots/gate-cpu-rev-paired.json, a real `perfconsole gate --rev A --rev B --paired` on a CPU)."""
from __future__ import annotations

from console_helpers import make_app, plain, shipped

from perfconsole.core import store

GATE = shipped("gate-cpu-rev-paired.json")


async def test_a_gate_record_opens_in_compare_with_its_verdict_and_interval():
    g = store.load(GATE)
    step = g.verdicts[0]
    app = make_app()
    async with app.run_test(size=(140, 40)) as pilot:
        app.open_path(GATE)
        await pilot.pause()
        assert app.session.compared is not None and [r.id for r in app.session.compared.runs] == [r.id for r in g.runs]
        text = plain(app.query_one("#compare-body").content)
        head = text.splitlines()[0]
        assert head.startswith(f"gate: {g.verdict.upper()} (A {g.programs[0]['label']}")
        assert f"step time: {step.verdict} - B vs A {step.change_text()} over {step.n} samples" in text
        assert "mode: paired" in text and "intervals: step time: the median of the pairs' log ratios" in text
        assert "Spec differences" in text and "Speedup of the step against run 1" in text  # the runs' own tables below
        assert len(app.session.runs) == 2

"""A gate's record from fixed step times (records folded from events, as the gate folds its processes'): the
verdicts the runner reads from them, the snapshot that reopens, the Markdown summary and the JUnit XML."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.gate.record import GateRecord
from perfconsole.core.gate.runner import Budget, Settings, step_pairs, verdicts
from perfconsole.core.gate.verdict import Threshold
from perfconsole.core.record import RunRecord
from perfconsole.core.reports import gate as report
from perfconsole.core.settings import RunSpec
from perfconsole.core.run_summary import compute_summary

SPEC = RunSpec(size="tiny", device="cpu", ctx=16, batch=2, warmup=1, steps=4)
SETTINGS = Settings(Threshold(0.03, True), Threshold(64, False), Budget(seconds=55))


def runs(ratio: float, rounds: int = 4, memory: tuple[float, float] | None = None) -> list[RunRecord]:
    """A's and B's records: in round r every step of A takes 10 + r ms (a host that slows down), B's `ratio`
    times that, with the same small wobble for both."""
    records = [RunRecord(SPEC), RunRecord(SPEC)]
    for r in range(rounds):
        for side, record in enumerate(records):
            record.apply(ev.Replicate(r, rounds))
            steps = [ev.Step(i + 1, False, (10 + r) * (ratio if side else 1) * (1 + 0.01 * (i % 2)), 1.0) for i in range(4)]
            for s in steps:
                record.apply(s)
            peak = memory[side] if memory else None
            summary = compute_summary(SPEC, steps, [], None, None, peak, peak)
            record.apply(ev.SummaryReady(summary.to_dict()))
            record.replicates[-1].status = "ok"
    for record in records:
        record.apply(ev.Finished("ok"))
    return records


def gate(ratio: float, **kw) -> GateRecord:
    rs = runs(ratio, **kw)
    return GateRecord("processes", [{"label": "A: base", "python": None, "revision": "a" * 40},
                                    {"label": "B: head", "python": None, "revision": "b" * 40}],
                      rs, verdicts(rs, SETTINGS), 4, 12.5, "55s", "decided")


def test_the_rounds_are_the_samples_and_a_tenth_slower_is_a_regression():
    g = gate(1.10, memory=(1000.0, 1200.0))
    pairs = step_pairs(g.runs, paired=False)  # each round's two process medians
    assert [round(a, 6) for a, _ in pairs] == [10.05, 11.055, 12.06, 13.065]
    assert [round(b / a, 6) for a, b in pairs] == [1.1] * 4
    step, alloc, reserved = g.verdicts
    assert step.verdict == "regression" and abs(step.estimate - 1.10) < 1e-9 and step.n == 4
    assert (alloc.verdict, alloc.estimate, reserved.verdict) == ("regression", 200.0, "regression")
    assert g.verdict == "regression" and g.exit_code() == 1
    same = gate(1.0)
    assert [v.verdict for v in same.verdicts] == ["same", "unmeasured", "unmeasured"] and same.exit_code() == 0


def test_paired_samples_are_the_steps_two_by_two():
    rs = runs(1.10, rounds=2)
    assert len(step_pairs(rs, paired=True)) == 8
    paired = Settings(SETTINGS.threshold, SETTINGS.memory_threshold, SETTINGS.budget, paired=True)
    step, alloc, _ = verdicts(rs, paired)
    assert step.verdict == "regression" and step.n == 8 and "paired mode" in alloc.note


def test_the_snapshot_reopens_with_its_verdicts_and_runs():
    g = gate(1.10)
    back = store.loads(store.dumps(g))
    assert isinstance(back, GateRecord) and back.kind == "gate" and back.verdict == "regression"
    assert back.verdicts == g.verdicts and [len(r.replicates) for r in back.runs] == [4, 4]
    assert back.to_dict()["interval_method"].startswith("95% log-ratio t-interval over rounds")


def test_markdown_summary():
    text = report.markdown(gate(1.10))
    lines = text.splitlines()
    assert lines[0] == "## perfconsole gate: **regression**"
    header = lines.index("| metric | A | B | B vs A [95% interval] | threshold | verdict |")
    row = lines[header + 2].split(" | ")
    assert row[0] == "| step time" and row[3].startswith("1.100x [") and row[4] == "±3%" and row[5] == "**regression** |"
    assert "- peak allocated: no peak allocated measured on either side" in text
    assert "intervals: 95% log-ratio t-interval over rounds" in text


def test_junit_has_a_testcase_per_metric_and_the_regression_fails():
    suite = ET.fromstring(report.junit(gate(1.10)))
    assert suite.tag == "testsuite" and suite.get("tests") == "3" and suite.get("failures") == "1"
    assert suite.get("skipped") == "2" and suite.get("errors") == "0"
    cases = list(suite.iter("testcase"))
    assert [c.get("name") for c in cases] == ["step time", "peak allocated", "peak reserved"]
    failure = cases[0].find("failure")
    assert failure is not None and failure.get("type") == "regression" and "1.100x" in failure.get("message")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["verdict"] == "regression" and props["A"] == "A: base"
    passing = ET.fromstring(report.junit(gate(1.0)))
    assert passing.get("failures") == "0" and list(passing.iter("testcase"))[0].find("system-out").text.startswith("same")


def test_export_gives_the_markdown_summary_and_the_json_document():
    from perfconsole.core.reports.export import export

    g = gate(1.10)
    assert export(g, "md") == report.markdown(g)
    assert '"verdict": "regression"' in export(g, "json")

"""--repeat N: the same spec in N fresh processes, one after the other; the spread between them."""
from __future__ import annotations

import threading
import time

import psutil
import pytest

from perfconsole.core import events as ev
from perfconsole.core.launch.replicates import RepeatedLaunch, make_launch
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.compare import Comparison
from perfconsole.core.reports.export import export
from perfconsole.core.settings import SpecError
from helpers import TINY as TINY_RUN
from helpers import stream

TINY = TINY_RUN.with_(repeat=3)


run = stream


@pytest.fixture(scope="module")
def three() -> tuple[RunRecord, list[ev.Event]]:
    """One run of three processes, and its events: the tests below only read them."""
    seen: list[ev.Event] = []
    return run(make_launch(TINY), RunRecord(TINY), seen), seen


@pytest.mark.e2e
def test_three_processes_keep_their_own_steps_and_give_a_between_process_interval(three):
    record, seen = three
    assert record.status == "ok" and [e.type for e in seen].count("finished") == 1
    assert [r.index for r in record.replicates] == [0, 1, 2]
    assert all(r.status == "ok" and len(r.steps) == 3 and len(r.warmup_steps) == 1 for r in record.replicates)
    pids = {e.pid for e in seen if isinstance(e, ev.RunStarted)}
    assert len(pids) == 3                                      # three fresh processes
    assert len(record.steps) == 9 and len(record.warmup_steps) == 1   # pooled; warm-up of the first
    s = record.summary
    assert s.processes == 3 and s.total_ms.n == 9
    b = s.between_processes["total_ms"]
    medians = sorted(r.summary.total_ms.median for r in record.replicates)
    assert b.n == 3 and b.median == pytest.approx(medians[1])
    assert b.ci95_low is None and b.too_few      # three processes: too few for an interval of their median
    assert set(s.between_processes) == {"total_ms", "forward_ms", "backward_ms", "optimizer_ms"}
    again = RunRecord.from_dict(record.to_dict())
    assert again.summary == s and [len(r.steps) for r in again.replicates] == [3, 3, 3]
    md = export(record, "md")
    assert "Between processes" in md and "3 processes" in md and "| too few processes |" in md


@pytest.mark.e2e
def test_one_process_is_a_plain_launch_and_says_its_interval_covers_one_process():
    one = TINY.with_(repeat=1)
    assert isinstance(make_launch(one), Launch)
    a = run(make_launch(one), RunRecord(one))
    assert a.replicates == [] and a.summary.between_processes is None and a.summary.processes == 1
    assert "within one process" in Comparison([a, a]).interval_basis()


def test_repeat_is_validated():
    with pytest.raises(SpecError, match="repeat"):
        TINY.with_(repeat=0).validate()
    assert TINY.label().endswith(" x3")


@pytest.mark.e2e
def test_a_comparison_of_repeated_runs_uses_the_spread_between_processes(three):
    a = three[0]
    two = TINY.with_(repeat=2)
    b = run(make_launch(two), RunRecord(two))
    c = Comparison([a, b])
    assert c.between_processes() and "medians of 3, 2 processes" in c.interval_basis()
    sp = c.speedups()[1]
    ba, bb = a.summary.between_processes["total_ms"], b.summary.between_processes["total_ms"]
    assert sp.ratio == pytest.approx(ba.mean / bb.mean)


@pytest.mark.e2e
def test_cancel_during_the_third_process_keeps_the_first_two_and_the_steps_of_the_third():
    spec = TINY.with_(steps=40)
    launch = RepeatedLaunch(spec, env={"PERFCONSOLE_FAULT": "slow:40"})
    record = RunRecord(spec)

    def cancel_in_third():
        while not (len(record.replicates) == 3 and len(record.replicates[2].steps) >= 2):
            time.sleep(0.02)
        launch.cancel()

    watcher = threading.Thread(target=cancel_in_third, daemon=True)
    watcher.start()
    run(launch, record)
    watcher.join(5)
    assert record.status == "cancelled"
    first, second, third = record.replicates
    assert first.status == second.status == "ok" and len(first.steps) == len(second.steps) == 40
    assert third.status == "cancelled" and 2 <= len(third.steps) < 40
    assert len(record.steps) == 80 + len(third.steps)
    assert record.summary.between_processes["total_ms"].n == 2   # whole processes only
    assert launch.current.proc is not None and not psutil.pid_exists(launch.current.proc.pid) or \
        psutil.Process(launch.current.proc.pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.e2e
def test_the_csv_export_names_each_step_s_process(three):
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(export(three[0], "csv"))))
    assert [r["process"] for r in rows] == ["1"] * 4 + ["2"] * 4 + ["3"] * 4   # 1 warm-up + 3 steps each

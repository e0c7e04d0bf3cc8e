"""Cells started ahead of their turn (held): they wait idle, run only when let go, and never outlive the runner."""
from __future__ import annotations

import select

import psutil
import pytest
from helpers import run_workers, workers_left

from perfconsole.core import events as ev
from perfconsole.core.grids.attention import AttentionLaunch, AttentionCell
from perfconsole.core.grids.cell_runner import CellRunner, default_start_ahead
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.core.grids.sweep import SweepRecord, SweepRunner, SweepSpec

SPEC = RunSpec(size="tiny", ctx=16, batch=2, warmup=1, steps=2, mode="fwd", device="cpu")


@pytest.mark.e2e
def test_a_held_worker_waits_idle_until_let_go():
    launch = Launch(SPEC)
    launch.start(hold=True)
    try:
        launch.wait_ready()
        proc = psutil.Process(launch.pid)
        cpu = sum(proc.cpu_times()[:2])
        ready, _, _ = select.select([launch.proc.stdout], [], [], 1.0)
        assert not ready, "a held worker wrote before it was let go"
        assert proc.is_running() and proc.status() == psutil.STATUS_SLEEPING
        assert sum(proc.cpu_times()[:2]) - cpu < 0.05  # blocked on stdin, not spinning
    except BaseException:
        launch.discard()
        raise
    rec = RunRecord(SPEC)
    events = list(launch.events())
    for e in events:
        rec.apply(e)
    assert rec.status == "ok" and len(rec.steps) == 2
    assert not any(isinstance(e, ev.Progress) and e.stage == ev.HELD for e in events)


@pytest.mark.e2e
def test_a_held_attention_worker_runs_its_cell_when_let_go():
    cell = AttentionCell(16, 32, 2, "naive", False, "fp32", 1, 2, "cpu", 0)
    launch = AttentionLaunch(cell)
    launch.start(hold=True)
    launch.wait_ready()
    events = list(launch.events())
    assert isinstance(events[-1], ev.Finished) and events[-1].status == "ok"
    assert any(isinstance(e, ev.SummaryReady) and e.summary["forward_ms"] for e in events)


@pytest.mark.e2e
def test_a_held_worker_exits_by_itself_when_its_stdin_closes():
    launch = Launch(SPEC)
    launch.start(hold=True)
    launch.wait_ready()
    launch.proc.stdin.close()
    assert launch.proc.wait(timeout=10) == 0
    launch.discard()


@pytest.mark.e2e
def test_discard_kills_and_reaps_a_held_worker():
    launch = Launch(SPEC)
    launch.start(hold=True)
    launch.discard()  # before it is even ready
    assert launch.proc.poll() is not None


def test_a_launch_under_nsys_is_never_held(tmp_path):
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\necho 'NVIDIA Nsight Systems version 2025.1.1'\n")
    fake.chmod(0o755)
    launch = Launch(SPEC.with_(profile="nsys"), out_dir=tmp_path, nsys=str(fake))
    with pytest.raises(ValueError, match="held"):
        launch.start(hold=True)
    assert launch.proc is None


def _sweep(ctxs: tuple[int, ...]) -> SweepRecord:
    return SweepRecord.new(SweepSpec(SPEC, ("tiny",), ctxs, ("fp32",), ("fwd",), (1,)).validate())


@pytest.mark.e2e
def test_a_batch_is_started_together_and_each_cell_still_has_its_own_process():
    rec = _sweep((16, 20, 24, 28))
    seen: list[tuple[int, int]] = []  # (cell index, worker processes alive) while a cell runs

    def on_update(u) -> None:
        if not u.cell_finished and u.run.status == "running":
            seen.append((u.index, len(run_workers())))

    SweepRunner(rec, start_ahead=3).run(on_update)
    assert [r.status for r in rec.runs] == ["ok"] * 4
    alive = dict(seen)  # the last count seen in each cell
    assert max(n for i, n in seen if i == 0) == 3  # cells 0-2: one batch
    assert alive[2] == 1 and max(n for i, n in seen if i == 3) == 1  # cell 3: a batch of its own
    assert all(s is not None and s > 0 for s in rec.cell_seconds)
    assert not workers_left()


@pytest.mark.e2e
def test_cancel_kills_the_held_cells_and_keeps_the_finished_one():
    rec = _sweep((16, 20, 24, 28))
    runner = SweepRunner(rec, start_ahead=4, cell_env=lambda s: {"PERFCONSOLE_FAULT": "slow:200"})

    def on_update(u) -> None:
        if u.index == 1 and u.run.steps:
            runner.cancel()

    runner.run(on_update)
    assert [r.status for r in rec.runs] == ["ok", "cancelled", "pending", "pending"]
    assert rec.status == "cancelled"
    assert not workers_left()


def test_start_ahead_is_at_least_one():
    assert 1 <= default_start_ahead() <= 8
    with pytest.raises(ValueError):
        CellRunner(_sweep((16,)), start_ahead=0)


@pytest.mark.e2e
def test_a_cancel_that_lands_while_a_cell_starts_stops_that_cell():
    """A signal can land between the runner's check and the child's start, when the launch has no
    process to stop yet: the runner cancels the child as soon as it exists."""
    rec = _sweep((16, 20))

    class CancelledMidStart(SweepRunner):
        def new_launch(self, index, cell):
            launch = super().new_launch(index, cell)
            start = launch.start

            def start_after_a_cancel(hold=False):
                self.cancel()  # reaches launch.cancel() before there is a process
                start(hold)

            launch.start = start_after_a_cancel
            return launch

    CancelledMidStart(rec, start_ahead=1).run()
    assert [r.status for r in rec.runs] == ["cancelled", "pending"]
    assert rec.status == "cancelled" and not rec.runs[0].steps
    assert not workers_left()

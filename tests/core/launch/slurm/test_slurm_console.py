"""The console's Grids pane filling from Slurm jobs: a ladder climbed by the console with its executor
set to Slurm (as `perfconsole --executor slurm` sets it), each rung a job of the local cluster."""
from __future__ import annotations

import copy

import pytest
from textual.widgets import Static

from perfconsole.core.grids.ladder import LadderRecord, LadderRunner, LadderSpec
from perfconsole.core.launch.slurm import SlurmExecutor
from perfconsole.core.launch.slurm_options import SlurmOptions
from perfconsole.core.settings import RunSpec
from tests.tui.console_helpers import make_app, plain, wait_for

pytestmark = pytest.mark.slurm


async def test_the_grids_pane_fills_from_slurm_jobs_and_counts_them(slurm_cluster, tmp_path):
    app = make_app()
    # Peaks given, not measured: the CPU's matmul peaks take minutes on a loaded 2-core machine.
    base = RunSpec(size="tiny", ctx=8, batch=1, device="cpu", warmup=0, steps=2, mode="train", peak_tflops=1.0,
                   peak_gbps=1.0)
    record = LadderRecord.new(LadderSpec(base, ("eager", "sdpa"), profile=False).validate())
    async with app.run_test(size=(160, 50)) as pilot:
        app.executor = SlurmExecutor(SlurmOptions(time="5"), tmp_path / "jobs")
        # What action_run_ladder does, with two rungs: the grid drawn, its own copy climbing on a worker.
        app.session.add_grid(record)
        app.launch = runner = LadderRunner(copy.deepcopy(record), executor=app.executor)
        app.show_grid(record)
        app.drive_ladder(record.id, runner)
        await wait_for(pilot, lambda: record.status in ("ok", "cancelled"), timeout=400)
        await pilot.pause()
        head = plain(app.query_one("#grids-head", Static).content)
        assert "2/2 cells finished" in head, head
        assert "slurm jobs: 0 pending, 0 running, 2 done" in head, head
        assert [r.status for r in record.runs] == ["ok", "ok"]
        assert all(r.jobs and r.jobs[0]["state"] == "COMPLETED" for r in record.runs)

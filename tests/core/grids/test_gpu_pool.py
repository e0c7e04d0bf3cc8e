"""Cells spread over GPUs: the scheduling runs real CPU children here, each given its own "GPU" slot
through the runner's `gpus` (the CLI refuses --gpus on the CPU; the runner does not check devices)."""
from __future__ import annotations

import threading
import time

import psutil
import pytest
from helpers import workers_left

from perfconsole.core.cli.cells import gpus_from_args
from perfconsole.core.grids.gpu_pool import run_on_gpus
from perfconsole.core.grids.sweep import SweepRecord, SweepRunner, SweepSpec
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.settings import RunSpec, SpecError

BASE = RunSpec(size="tiny", ctx=16, batch=2, warmup=1, steps=2, mode="fwd", device="cpu")


@pytest.mark.e2e
def test_cells_run_side_by_side_one_per_gpu_and_keep_their_order(tmp_path, monkeypatch):
    # Each cell sleeps 400 ms a step, so cells that overlap in time did run side by side.
    monkeypatch.setenv("PERFCONSOLE_FAULT", "slow:400")
    # Cold workers: a forked one's /proc environ is its warm process's, where its GPU cannot be read.
    monkeypatch.setenv("PERFCONSOLE_WARM", "off")
    spec = SweepSpec(BASE, ("tiny",), (8, 16, 24, 32), ("fp32",), ("fwd",), (1,)).validate()
    record = SweepRecord.new(spec)
    seen_env: dict[int, str] = {}
    spans: dict[int, list[float]] = {}
    runner = SweepRunner(record, save_to=tmp_path / "sweep.json", gpus=["0", "1"])
    launches = {}
    real_new = runner.new_launch

    def new_launch(index, cell):
        launch = real_new(index, cell)
        launches[index] = launch
        return launch
    runner.new_launch = new_launch

    def on_update(u):
        spans.setdefault(u.index, [time.monotonic(), 0.0])[1] = time.monotonic()
        launch = launches.get(u.index)
        if launch is not None and launch.proc is not None and u.index not in seen_env:
            try:
                seen_env[u.index] = psutil.Process(launch.proc.pid).environ().get("CUDA_VISIBLE_DEVICES")
            except psutil.Error:
                pass

    runner.run(on_update)
    assert record.status == "ok" and all(r.status == "ok" for r in record.runs)
    assert [r.spec.ctx for r in record.runs] == [8, 16, 24, 32]     # the grid's order, not finishing order
    assert sorted(record.cell_gpus) == ["0", "0", "1", "1"]
    assert record.cell_gpus[0] != record.cell_gpus[1]               # the first two started together
    assert seen_env and all(seen_env[i] == record.cell_gpus[i] for i in seen_env)
    (a0, a1), (b0, b1) = spans[0], spans[1]
    assert min(a1, b1) > max(a0, b0), "cells 0 and 1 did not overlap in time"
    assert all(s is not None for s in record.cell_seconds)


@pytest.mark.e2e
def test_an_oom_on_one_gpu_marks_its_cell_and_the_rest_go_on(monkeypatch):
    spec = SweepSpec(BASE, ("tiny",), (8, 16, 24), ("fp32",), ("fwd",), (1,)).validate()
    record = SweepRecord.new(spec)
    runner = SweepRunner(record, gpus=["0", "1"],
                         cell_env=lambda s: {"PERFCONSOLE_FAULT": "oom:1"} if s.ctx == 16 else None)
    runner.run()
    assert [r.status for r in record.runs] == ["ok", "oom", "ok"]
    assert record.status == "ok"


@pytest.mark.e2e
def test_cancel_stops_every_running_cell_and_starts_no_more(monkeypatch):
    monkeypatch.setenv("PERFCONSOLE_FAULT", "slow:500")
    spec = SweepSpec(BASE.with_(steps=40), ("tiny",), (8, 16, 24, 32), ("fp32",), ("fwd",), (1,)).validate()
    record = SweepRecord.new(spec)
    runner = SweepRunner(record, gpus=["0", "1"])

    def on_update(u):
        if u.run.steps and not runner.cancelled:
            threading.Thread(target=runner.cancel, daemon=True).start()

    runner.run(on_update)
    assert record.status == "cancelled"
    assert [r.status for r in record.runs[2:]] == ["pending", "pending"]
    assert any(r.steps for r in record.runs[:2])
    assert not workers_left()


def test_the_pool_never_gives_one_gpu_two_cells_at_once():
    busy: dict[str, int] = {}
    lock = threading.Lock()
    worst = []

    def run_cell(index: int, gpu: str) -> None:
        with lock:
            busy[gpu] = busy.get(gpu, 0) + 1
            worst.append(busy[gpu])
        time.sleep(0.05)
        with lock:
            busy[gpu] -= 1

    run_on_gpus(list(range(12)), ["0", "1", "2"], run_cell, threading.Event())
    assert len(worst) == 12 and max(worst) == 1


def test_gpus_on_the_cpu_is_a_one_line_error():
    with pytest.raises(SpecError) as e:
        gpus_from_args("0,1", "cpu")
    assert e.value.field == "gpus" and "\n" not in str(e.value)
    assert gpus_from_args(None, "cpu") is None


def test_a_torchrun_job_cannot_be_held():
    with pytest.raises(ValueError, match="torchrun"):
        Launch(BASE.with_(mode="train", nproc=2, parallel="ddp")).start(hold=True)

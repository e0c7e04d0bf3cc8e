"""Sweeps end to end on the CPU with the tiny model: one child per cell, OOM cells, warm-up study, Ctrl-C."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from perfconsole.core import store
from perfconsole.core.reports import export
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.core.grids.cell_runner import estimate_seconds
from perfconsole.core.grids.sweep import SweepRecord, SweepRunner, SweepSpec

BASE = RunSpec(size="tiny", batch=2, steps=2, device="cpu")


def _spec(**kw) -> SweepSpec:
    d = dict(sizes=("tiny",), ctxs=(16, 32), precisions=("fp32",), modes=("fwd",), warmups=(1,))
    d.update(kw)
    return SweepSpec(BASE, **d)


def test_cells_are_the_product_with_contexts_ascending():
    cells = _spec(ctxs=(32, 16), precisions=("fp32", "bf16"), modes=("fwd", "train")).cells()
    assert len(cells) == 8
    assert [(c.precision, c.mode, c.ctx) for c in cells[:3]] == [("fp32", "fwd", 16), ("fp32", "fwd", 32),
                                                                 ("fp32", "train", 16)]
    assert all(c.size == "tiny" and c.batch == 2 for c in cells)


@pytest.mark.parametrize("kw, field", [
    (dict(sizes=("tiny", "huge")), "size"), (dict(ctxs=(16, 16)), "ctxs"), (dict(modes=()), "modes"),
    (dict(precisions=("fp8",)), "precision"), (dict(warmups=(-1,)), "warmup"), (dict(sizes=("custom",)), "sizes"),
])
def test_bad_grids_name_the_field(kw, field):
    with pytest.raises(SpecError) as err:
        _spec(**kw).validate()
    assert err.value.field == field


def test_one_step_is_refused_because_a_std_needs_two():
    with pytest.raises(SpecError, match="steps"):
        SweepSpec(BASE.with_(steps=1), ("tiny",), (16,), ("fp32",), ("fwd",), (1,)).validate()


def test_estimate_uses_fixed_cost_plus_work_rate():
    assert estimate_seconds([], [1.0]) is None
    done = [(0.0, 2.0, False), (10.0, 4.0, True), (30.0, 8.0, True)]   # fixed 2 s, then 0.2 s per unit
    assert estimate_seconds(done, [20.0, 0.0]) == pytest.approx((2 + 4.0) + 2)
    assert estimate_seconds(done, []) == 0


@pytest.mark.e2e
@pytest.mark.parametrize("start_ahead", [1, 3])
def test_sweep_runs_each_cell_in_a_child_and_an_oom_cell_does_not_stop_it(tmp_path, start_ahead):
    spec = _spec(ctxs=(16, 24, 32)).validate()
    rec = SweepRecord.new(spec)
    save = tmp_path / "sweep.json"
    updates = []
    # A real OOM path in the worker (its fault hook), only in the middle cell.
    runner = SweepRunner(rec, cell_env=lambda s: {"PERFCONSOLE_FAULT": "oom:1"} if s.ctx == 24 else None,
                         save_to=save, start_ahead=start_ahead)
    runner.run(updates.append)
    assert [r.status for r in rec.runs] == ["ok", "oom", "ok"]
    assert rec.status == "ok"
    assert rec.runs[1].warmup_steps and not rec.runs[1].steps  # died at the first measured step
    finished = [u for u in updates if u.cell_finished]
    assert [u.done for u in finished] == [1, 2, 3]
    assert finished[0].eta_s is not None and finished[-1].eta_s == 0
    assert all(s is not None and s > 0 for s in rec.cell_seconds)
    again = store.load(save)
    assert isinstance(again, SweepRecord) and [r.status for r in again.runs] == ["ok", "oom", "ok"]
    md = export.export(again, "md")
    assert "| tiny | 64 | 256 | 2 | 4 | 24 | **OOM** |" in md
    assert "OOM starts: tiny fp32 fwd from ctx 24" in md


def _cli(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "perfconsole.tui.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}, **kw)


def test_warmup_study_json_and_markdown(tmp_path):
    save = tmp_path / "w.json"
    p = _cli("sweep", "--sizes", "tiny", "--ctx", "16", "--mode", "fwd", "--warmup", "0,2", "--steps", "2",
             "--batch", "2", "--device", "cpu", "--json", "--save", str(save))
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    assert out == save.read_text()  # --json prints the snapshot --save writes
    runs = json.loads(export.export(store.loads(out), "json"))["runs"]
    assert [r["spec"]["warmup"] for r in runs] == [0, 2]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert runs[0]["warmup_steps"] == [] and runs[0]["first_step_ms"] == runs[0]["steps"][0]["total_ms"]
    assert len(runs[1]["warmup_steps"]) == 2 and runs[1]["first_step_ms"] == runs[1]["warmup_steps"][0]["total_ms"]
    assert all(r["forward_ms"] > 0 and r["backward_ms"] is None for r in runs)
    assert "[2/2] tiny ctx16 b2 fp32 fwd" in err  # progress went to stderr, not into the JSON
    md = export.export(store.load(save), "md")
    assert "## Warm-up study" in md and "measured-step variability by warm-up steps: 0 warm-up" in md


def _marked(mark: str) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("PERFCONSOLE_TEST_MARK") == mark:
                out.append(proc)
        except (psutil.Error, OSError):
            pass
    return out


def test_ctrl_c_keeps_finished_cells_and_leaves_no_process(tmp_path):
    save = tmp_path / "s.json"
    mark = f"ctrl-c-{os.getpid()}-{time.monotonic_ns()}"
    # slow:300 makes every step take 0.3 s, so the second cell is surely running when SIGINT lands.
    # --start-ahead 3: the third cell's process is alive (held) then too, and must go with the rest.
    p = _cli("sweep", "--sizes", "tiny", "--ctx", "16,24,32", "--mode", "fwd", "--warmup", "1", "--steps", "5",
             "--batch", "2", "--device", "cpu", "--save", str(save), "--start-ahead", "3",
             # cold: a forked worker's /proc environ, where the mark is looked for, is its warm process's
             env={"PERFCONSOLE_FAULT": "slow:300", "PERFCONSOLE_TEST_MARK": mark, "PERFCONSOLE_WARM": "off"})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if save.exists() and sum(r["status"] == "ok" for r in json.loads(save.read_text())["data"]["runs"]) >= 1:
            break
        time.sleep(0.2)
    else:
        p.kill()
        pytest.fail("the first cell never finished")
    time.sleep(1.5)  # into the second cell's steps
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    rec = store.load(save)
    assert rec.status == "cancelled"
    assert [r.status for r in rec.runs] == ["ok", "cancelled", "pending"]
    assert len(rec.runs[0].steps) == 5
    assert "not run" in out  # the grid is still printed, with the cell that never started
    assert not _marked(mark), "a cell's process outlived the sweep"


@pytest.mark.e2e
@pytest.mark.parametrize("start_ahead", [2])  # 1: tests/core/cli/test_repeat.py::test_sweep_repeat_runs_each_cell_in_its_processes
def test_sweep_cells_with_repeat_run_their_replicate_processes(tmp_path, start_ahead):
    spec = SweepSpec(BASE.with_(repeat=2), ("tiny",), (16, 24), ("fp32",), ("fwd",), (1,)).validate()
    rec = SweepRecord.new(spec)
    SweepRunner(rec, save_to=tmp_path / "s.json", start_ahead=start_ahead).run(lambda _u: None)
    assert [r.status for r in rec.runs] == ["ok", "ok"]
    for r in rec.runs:
        assert len(r.replicates) == 2 and r.summary.between_processes["total_ms"].n == 2
    again = store.load(tmp_path / "s.json")
    assert [len(r.replicates) for r in again.runs] == [2, 2]

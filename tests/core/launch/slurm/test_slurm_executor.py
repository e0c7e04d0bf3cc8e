"""Grids and runs as Slurm jobs, against a real Slurm (the one-node cluster of scripts/local_slurm.sh).

Kept fast: the tiny model at ctx 8, batch 1, two steps. The time-limit test needs Slurm's smallest
limit (one minute, checked every 30 s), so its grid is submitted when this module starts and judged by
its last test, while the others run."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

from helpers import point_at_warm

from perfconsole.core.grids.sweep import SweepRecord, SweepRunner, SweepSpec
from perfconsole.core.launch.slurm import SlurmExecutor
from perfconsole.core.launch.slurm_options import SlurmOptions
from perfconsole.core.settings import RunSpec
from tests.core.launch.slurm.conftest import squeue

pytestmark = pytest.mark.slurm

# Peaks given, not measured: the CPU's matmul peaks take minutes on a loaded 2-core machine.
TINY = ["--sizes", "tiny", "--ctx", "8,16", "--batch", "1", "--steps", "2", "--warmup", "0", "--device", "cpu",
        "--mode", "fwd", "--peak-tflops", "1", "--peak-gbps", "1"]


@pytest.fixture(scope="module", autouse=True)
def shared_data_dir(tmp_path_factory):
    """One data directory for the module's commands and jobs: the CPU's peaks are measured once."""
    return tmp_path_factory.mktemp("data")


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "perfconsole.core.cli.main", *args]


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:  # a command that overran is stopped as a user would: SIGTERM, and its jobs are scancelled
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture(autouse=True)
def _same_data_dir(shared_data_dir, monkeypatch):
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(shared_data_dir))
    point_at_warm()  # a local sweep's cells fork from the xdist worker's warm process; Slurm's jobs start cold


def shape(value):
    """The keys of every object, recursively (a list: the union of its items' shapes)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = [shape(v) for v in value if isinstance(v, (dict, list))]
        return [items[0]] if items else []
    return "value"


@pytest.fixture(scope="module", autouse=True)
def time_limited_grid(slurm_cluster, tmp_path_factory, shared_data_dir):
    """A two-cell grid whose first cell hangs in a job of Slurm's shortest limit (1 minute)."""
    folder = tmp_path_factory.mktemp("timeout")
    spec = SweepSpec(RunSpec(size="tiny", batch=1, steps=2, device="cpu", peak_tflops=1.0, peak_gbps=1.0),
                     ("tiny",), (8, 16), ("fp32",),
                     ("fwd",), (0,)).validate()
    record = SweepRecord.new(spec)
    executor = SlurmExecutor(SlurmOptions(time="1", options={"job-name": "pc-time-limit"}), folder)
    data = {"PERFCONSOLE_DATA_DIR": str(shared_data_dir)}
    runner = SweepRunner(record, executor=executor,
                         cell_env=lambda s: {**data, "PERFCONSOLE_FAULT": "hang:0"} if s.ctx == 8 else data)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    yield runner, thread
    runner.cancel()


def test_a_sweep_through_sbatch_as_a_job_array_has_a_local_sweeps_shape(tmp_path):
    local = subprocess.Popen(command("sweep", *TINY, "--json", "--start-ahead", "1"), stdout=subprocess.PIPE, text=True)
    try:
        here = json.loads(local.communicate(timeout=300)[0])
        done = cli("sweep", *TINY, "--executor", "slurm", "--slurm-array-parallelism", "2", "--slurm-time", "5",
                   "--slurm-folder", str(tmp_path / "jobs"), "--save", str(tmp_path / "sweep.json"), "--json")
    finally:
        local.kill()
    assert done.returncode == 0, done.stderr[-2000:]
    remote = json.loads(done.stdout)
    runs = remote["data"]["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"]
    # Every cell names its job: one array (id_0, id_1), the node, Slurm's final state and the queue time.
    jobs = [r["jobs"] for r in runs]
    assert all(len(j) == 1 and j[0]["state"] == "COMPLETED" and j[0]["nodes"] for j in jobs)
    array_ids = {j[0]["job_id"].split("_")[0] for j in jobs}
    assert len(array_ids) == 1 and sorted(j[0]["job_id"].split("_")[1] for j in jobs) == ["0", "1"]
    assert all(j[0]["queued_s"] is not None and j[0]["ran_s"] is not None for j in jobs)
    assert "(job " in done.stderr and "slurm: 0 pending, 0 running, 2 done" in done.stderr
    # The same document as a local sweep's: only the jobs a local cell never had differ.
    assert [r["jobs"] for r in here["data"]["runs"]] == [[], []]
    for r in runs:
        r["jobs"] = []
    assert shape(remote) == shape(here)
    assert json.loads((tmp_path / "sweep.json").read_text())["data"]["status"] == "ok"


def test_ctrl_c_in_a_sweep_cancels_every_job(tmp_path):
    # Its own job name: other files' jobs share the one cluster while this test runs.
    proc = subprocess.Popen(command("sweep", "--sizes", "tiny", "--ctx", "8,16,32", "--batch", "1", "--steps",
                                    "100000", "--warmup", "0", "--device", "cpu", "--mode", "fwd", "--executor",
                                    "slurm", "--slurm-time", "5", "--slurm-option", "job-name=pc-ctrl-c",
                                    "--slurm-folder", str(tmp_path / "jobs"), "--save", str(tmp_path / "sweep.json")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(squeue("pc-ctrl-c")) < 3:
        time.sleep(0.3)
    assert len(squeue("pc-ctrl-c")) == 3, "the three cells were not all submitted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    deadline = time.monotonic() + 20
    while squeue("pc-ctrl-c") and time.monotonic() < deadline:
        time.sleep(0.3)
    assert squeue("pc-ctrl-c") == []   # nothing queued, nothing running
    saved = json.loads((tmp_path / "sweep.json").read_text())["data"]
    assert saved["status"] == "cancelled"
    assert {r["status"] for r in saved["runs"]} <= {"cancelled", "pending"}


def test_a_two_task_job_runs_torchrun_on_each_task_for_a_gloo_data_parallel_run(tmp_path):
    # Two tasks on the one node stand in for two nodes: each starts torchrun (one process), and the two
    # meet at a c10d rendezvous on the job's first node.
    done = cli("run", "--size", "tiny", "--ctx", "8", "--batch", "1", "--steps", "2", "--warmup", "0",
               "--device", "cpu", "--mode", "train", "--nproc", "2", "--nodes", "2", "--executor", "slurm",
               "--peak-tflops", "1", "--peak-gbps", "1",
               "--slurm-option", "nodes=1", "--slurm-option", "ntasks-per-node=2", "--slurm-time", "5",
               "--slurm-folder", str(tmp_path / "jobs"), "--out-dir", str(tmp_path / "out"), "--json",
               timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout)["data"]
    assert data["status"] == "ok" and data["world_size"] == 2 and len(data["ranks"]) == 2
    job = data["jobs"][0]
    assert job["state"] == "COMPLETED" and job["nodes"]
    ids = sorted(p.name for p in (tmp_path / "jobs").glob(f"{job['job_id']}_*_where.json"))
    assert ids == [f"{job['job_id']}_0_where.json", f"{job['job_id']}_1_where.json"]   # one agent per task
    # Both agents joined the one rendezvous: torchrun names each agent's log folder after its id.
    agents = list((tmp_path / "out" / "torchrun").glob(f"perfconsole-{job['job_id']}_*"))
    assert len(agents) == 2


@pytest.mark.parametrize("flag, value", [("--slurm-partition", "no-such-partition"),
                                         ("--slurm-account", "no-such-account"),
                                         ("--slurm-time", "soon")])
def test_what_slurm_refuses_is_one_line_and_exit_2_before_any_job(flag, value, tmp_path):
    done = cli("sweep", *TINY, "--executor", "slurm", flag, value, "--slurm-folder", str(tmp_path / "jobs"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfconsole: error: slurm refused the job: "), done.stderr
    assert not list((tmp_path / "jobs").glob("*_submission.sh"))


@pytest.mark.parametrize("value", ["90", "30:30"])   # 30:30 is 31 minutes to Slurm, which rounds seconds up
def test_a_slurm_time_over_the_partitions_max_time_is_refused_naming_the_limit_before_any_job(value, tmp_path):
    done = cli("sweep", *TINY, "--executor", "slurm", "--slurm-time", value, "--slurm-folder", str(tmp_path / "jobs"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [f"perfconsole: error: --slurm-time {value} is over partition debug's MaxTime of 00:30:00: "
                     "ask for that or less, or another partition"], done.stderr
    assert not (tmp_path / "jobs").exists() or not list((tmp_path / "jobs").glob("*_submission.sh"))


def test_a_job_past_its_time_limit_is_an_error_cell_naming_timeout_and_the_grid_goes_on(time_limited_grid):
    runner, thread = time_limited_grid
    thread.join(timeout=300)
    assert not thread.is_alive(), "the time-limited grid did not end"
    hung, other = runner.record.runs
    assert hung.status == "error" and hung.error.kind == "slurm"
    assert "TIMEOUT" in hung.error.message and hung.jobs[0]["state"] == "TIMEOUT"
    # The other cell ran its own job to its end (on a machine so loaded that two tiny steps pass a
    # minute, that end is a TIMEOUT of its own).
    assert (other.status, other.jobs[0]["state"]) in (("ok", "COMPLETED"), ("error", "TIMEOUT"))
    assert runner.record.status == "ok"   # every cell finished, one of them as an error
    # Nothing left running or queued. A job that sacct already gives as TIMEOUT can still be listed as
    # COMPLETING while slurmd reaps its processes (KillWait=2, longer on a loaded machine: a clean-clone CI
    # run saw '53 COMPLETING' here), so that state alone is waited out, for a bounded time.
    left = squeue("pc-time-limit")
    assert all(line.split()[-1] == "COMPLETING" for line in left), left
    deadline = time.monotonic() + 60
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = squeue("pc-time-limit")
    assert left == []


def test_a_sweep_with_no_slurm_time_takes_the_partitions_limit_and_says_which(tmp_path):
    # The local cluster's one partition has MaxTime=30 and no DefaultTime: the job asks for its 30 minutes,
    # not perfconsole's 60 (which Slurm refuses there: "Requested time limit is invalid").
    one_cell = [*TINY[:2], "--ctx", "8", *TINY[4:]]
    done = cli("sweep", *one_cell, "--executor", "slurm", "--slurm-folder", str(tmp_path / "jobs"), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "time limit 00:30:00 per job, partition debug's MaxTime" in done.stderr, done.stderr[-2000:]
    run = json.loads(done.stdout)["data"]["runs"][0]
    assert run["status"] == "ok"
    job = run["jobs"][0]
    assert job["state"] == "COMPLETED"
    assert (job["time_limit"], job["time_limit_from"]) == ("00:30:00", "partition debug's MaxTime")
    script = (tmp_path / "jobs" / f"{job['job_id']}_submission.sh").read_text()
    assert "#SBATCH --time=00:30:00" in script

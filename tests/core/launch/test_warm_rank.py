"""A torchrun rank that starts warm (core.launch.warm_rank) is, to torchrun, the worker itself: it ends as the
worker ends (exit code, or the signal that killed it), a stop signal sent to it reaches the worker, and killed
with SIGKILL it takes the worker with it. Without a warm process it becomes the worker cold, in place.
The data-parallel jobs' own tests (test_data_parallel.py, test_ladder_dp.py) run every rank through it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from helpers import TINY, gone_or_zombie

from perfconsole.core.launch import warm
from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import events_in, worker_argv

pytestmark = pytest.mark.e2e

SLOW = TINY.with_(warmup=1, steps=400)


def rank(env: dict[str, str]) -> subprocess.Popen:
    """A rank as torchrun starts one: the shim around the worker's command line, the rank's own process group."""
    argv = [sys.executable, "-m", "perfconsole.core.launch.warm_rank", *worker_argv(SLOW, None)]
    # stdin a pipe held open, as torchrun's own from the launcher: a worker ends when its stdin closes
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PERFCONSOLE_FAULT": "slow:100", **env}, start_new_session=True)


def events(lines) -> list:
    return [e for e in (events_in(line)[0] for line in lines) if e is not None]


def first_step(proc: subprocess.Popen) -> dict:
    """Read the rank's events up to its first measured step; the environment its worker announced."""
    environment: dict = {}
    for line in proc.stdout:
        event = events_in(line)[0]
        if isinstance(event, ev.RunStarted):
            environment = event.environment
        if isinstance(event, ev.Step) and not event.warmup:
            return environment
    pytest.fail(f"no step; stderr: {proc.stderr.read()[-2000:]}")


@pytest.fixture
def server() -> psutil.Process:
    own = warm.start_own()  # the xdist worker's (tests/conftest.py), or one of this test's own
    assert own is not None and own.wait_ready() is None
    return psutil.Process(own.proc.pid)


def forked_worker(server: psutil.Process) -> psutil.Process:
    kids = [p for p in server.children() if not gone_or_zombie(p.pid)]
    assert len(kids) == 1, kids
    return kids[0]


def test_killed_with_sigkill_the_rank_takes_its_forked_worker(server):
    proc = rank({warm.SHARED_VAR: warm.shared_value(warm._own)})
    try:
        assert first_step(proc)["start"] == "warm"
        worker = forked_worker(server)
        assert worker.pid != proc.pid and worker.cmdline()[:3] == [sys.executable, "-m", "perfconsole.core.measure.worker"]
        os.kill(proc.pid, signal.SIGKILL)  # as torchrun's last resort, or the OOM killer
        deadline = time.monotonic() + 10
        while not gone_or_zombie(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone_or_zombie(worker.pid)
    finally:
        proc.kill()
        proc.wait()


def test_a_stop_signal_reaches_the_worker_and_the_rank_ends_as_a_cold_one_does(server):
    ends = {}
    for how, env in (("warm", {warm.SHARED_VAR: warm.shared_value(warm._own)}), ("cold", {warm.OFF_VAR: "off"})):
        proc = rank(env)
        try:
            first_step(proc)
            if how == "warm":
                worker = forked_worker(server)
            else:  # in place: the shim became the worker (exec), the pid torchrun knows
                assert proc.pid not in [p.pid for p in server.children()]
                assert psutil.Process(proc.pid).cmdline()[:3] == [sys.executable, "-m", "perfconsole.core.measure.worker"]
            os.kill(proc.pid, signal.SIGTERM)  # torchrun's stop
            ends[how] = proc.wait(timeout=30)
            if how == "warm":
                assert gone_or_zombie(worker.pid)
        finally:
            proc.kill()
            proc.wait()
    assert ends["warm"] == ends["cold"] == -signal.SIGTERM


def test_without_a_warm_process_to_reach_the_rank_is_the_worker_cold_and_says_why(tmp_path):
    argv = [sys.executable, "-m", "perfconsole.core.launch.warm_rank", *worker_argv(TINY, None)]
    gone = subprocess.Popen(["true"])  # a server whose warm process has ended: its pid is no more
    gone.wait()
    os.chmod(tmp_path, 0o700)
    env = {**os.environ, warm.SHARED_VAR: f"{gone.pid}:{tmp_path}/socket"}
    with open(tmp_path / "stderr", "w+") as err:  # stdin held open until the worker has finished
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        stdout = proc.stdout.read()
        out = subprocess.CompletedProcess(argv, proc.wait(timeout=300), stdout, (tmp_path / "stderr").read_text())
        proc.stdin.close()
    assert out.returncode == 0, out.stderr[-2000:]
    started = next(e for e in events(out.stdout.splitlines()) if isinstance(e, ev.RunStarted))
    assert started.environment["start"] == "cold: the server's warm process has ended"
    assert isinstance(events(out.stdout.splitlines())[-1], ev.Finished)

"""Runs forked from a warm process (core.launch.warm) are the runs a cold `python -m` worker makes: the same
events, record fields and, on the CPU with the same seed, the same losses; every failure of a forked worker
(an exit, a SIGKILL to its group, an OOM) is reported as a cold one's and leaves the warm process serving;
the warm process ends with the process that started it; a command finds a console's warm process."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from helpers import PC, TINY, gone_or_zombie, running, stream

from perfconsole.core.launch import warm
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord

pytestmark = pytest.mark.e2e

WORKER = "perfconsole.core.measure.worker"
SPEC = TINY.with_(warmup=2, steps=3, seed=1234)


@pytest.fixture(scope="module")
def warm_process():
    """One for the file (it imports torch once, seconds on a loaded machine): the tests also show it serves on. It
    is the xdist worker's (tests/conftest.py), left up for the worker's next e2e files, as is the one the last test
    here starts in its place; the session's end stops it (a console's own ends with it: test_console_warm.py)."""
    own = warm.start_own()
    assert own.wait_ready() is None, list(own.stderr_tail)
    return own


def launched(spec=SPEC, env=None, hold=False) -> tuple[RunRecord, list, Launch]:
    launch, record, seen = Launch(spec, env=env), RunRecord(spec), []
    launch.start(hold=hold)
    if hold:
        launch.wait_ready()
    stream(launch, record, seen)
    return record, seen, launch


def server_children(own: warm.WarmProcess) -> list[psutil.Process]:
    """The warm process's children still running (one it reaps between listing and reading is gone, not an error:
    the clean-clone CI of 16cdf1d raised NoSuchProcess here)."""
    return [p for p in psutil.Process(own.proc.pid).children() if not gone_or_zombie(p.pid)]


def test_a_forked_run_is_the_same_program_as_a_cold_one(warm_process, monkeypatch):
    hot, hot_seen, hot_launch = launched()
    monkeypatch.setenv(warm.OFF_VAR, "off")
    cold, cold_seen, cold_launch = launched()
    assert hot_launch.start_how == "warm" and hot.environment["start"] == "warm"
    assert cold_launch.start_how == cold.environment["start"] == "cold: PERFCONSOLE_WARM=off"
    assert hot_launch.proc.returncode == cold_launch.proc.returncode == 0
    assert hot.status == cold.status == "ok"
    # The same stream (held progress aside: its words name the model, not the start) and the same record.
    assert [e.type for e in hot_seen] == [e.type for e in cold_seen]
    assert hot.to_dict().keys() == cold.to_dict().keys()
    assert hot.environment.keys() == cold.environment.keys()
    assert {k: v for k, v in hot.environment.items() if k != "start"} == \
           {k: v for k, v in cold.environment.items() if k != "start"}
    assert {**hot.model, "cached": None} == {**cold.model, "cached": None}  # the second run finds the FLOPs cached
    losses = [s.loss for s in hot.warmup_steps + hot.steps]
    assert None not in losses and len(losses) == 5
    assert losses == [s.loss for s in cold.warmup_steps + cold.steps]
    # The forked worker was the warm process's child, in a session and process group of its own.
    assert hot.environment and hot_launch.pid != warm_process.proc.pid


@pytest.mark.parametrize("fault, status, words", [
    ("exit:1", "error", "worker exited with code 3 before finishing"),
    ("kill:1", "error", "worker killed by signal SIGKILL"),
    ("oom:1", "oom", "CUDA out of memory"),
    ("raise:1", "error", "injected failure"),
])
def test_a_worker_that_fails_leaves_the_warm_process_serving(warm_process, fault, status, words):
    server = warm_process.proc.pid
    record, _, launch = launched(env={"PERFCONSOLE_FAULT": fault})
    assert launch.start_how == "warm"
    assert record.status == status and words in record.error.message, record.error
    assert len(record.warmup_steps) == 1
    after, _, again = launched()
    assert again.start_how == "warm" and after.status == "ok"
    assert warm_process.proc.pid == server and warm_process.proc.poll() is None
    assert server_children(warm_process) == []  # both reaped, nothing left running


def test_sigkill_to_a_warm_workers_group_and_a_cancel_leave_it_serving(warm_process):
    for end in ("kill", "cancel"):
        launch, record = Launch(SPEC.with_(steps=400), env={"PERFCONSOLE_FAULT": "slow:100"}), RunRecord(SPEC)
        for event in launch.events():
            record.apply(event)
            if event.type == "step" and not event.warmup:
                assert os.getpgid(launch.pid) == launch.pid != os.getpgid(0)  # a group of its own
                # ps, top and nvidia-smi show the worker's command line, as a cold one's
                assert psutil.Process(launch.pid).cmdline()[:4] == [sys.executable, "-m", WORKER, "--spec"]
                launch.kill() if end == "kill" else launch.cancel()
        assert launch.start_how == "warm" and record.status == "cancelled" and record.steps
        assert gone_or_zombie(launch.pid)
    after, _, again = launched()
    assert again.start_how == "warm" and after.status == "ok"


def test_a_held_launch_is_forked_and_waits_for_its_turn(warm_process):
    """core.grids.cell_runner starts cells ahead with start(hold=True)."""
    record, seen, launch = launched(hold=True)
    assert launch.start_how == "warm" and record.status == "ok" and len(record.steps) == 3
    assert "held" not in [getattr(e, "stage", "") for e in seen]


def test_what_cannot_be_forked_starts_cold_and_says_why(warm_process):
    record, _, launch = launched(env={"MKL_NUM_THREADS": "3"})  # read by MKL as torch loads
    assert launch.start_how.startswith("cold: the run sets MKL_NUM_THREADS otherwise")
    assert record.environment["start"] == launch.start_how and record.status == "ok"
    proc, why = warm.spawn([sys.executable, "-m", "json.tool"], dict(os.environ))
    assert proc is None and why == "not a worker this warm process has loaded"


def test_a_run_with_its_own_omp_num_threads_is_forked_with_those_threads(warm_process, monkeypatch):
    """torchrun gives every rank OMP_NUM_THREADS=1 where it is unset: a forked run sets its intra-op threads as
    the variable would have as torch loaded, and computes what a cold run with it does."""
    threads = "2" if os.environ.get("OMP_NUM_THREADS") != "2" else "3"  # not the warm process's own
    hot, _, hot_launch = launched(env={"OMP_NUM_THREADS": threads})
    monkeypatch.setenv(warm.OFF_VAR, "off")
    cold, _, _ = launched(env={"OMP_NUM_THREADS": threads})
    assert hot_launch.start_how == "warm" and hot.status == cold.status == "ok"
    assert hot.environment["threads"] == cold.environment["threads"] == int(threads)
    assert [s.loss for s in hot.warmup_steps + hot.steps] == [s.loss for s in cold.warmup_steps + cold.steps]


def test_variables_read_at_import_decide_and_those_read_later_do_not():
    from perfconsole.core.launch.warm_server import differs

    base = {"OMP_NUM_THREADS": "4", "PATH": "/bin"}
    assert differs({**base, "OMP_NUM_THREADS": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "RANK": "1"}, base) is None
    assert differs({"PATH": "/bin"}, base) == "OMP_NUM_THREADS"            # unset: torch's own default is not known
    assert differs({**base, "OMP_NUM_THREADS": "0"}, base) == "OMP_NUM_THREADS"
    assert differs({**base, "OMP_NUM_THREADS": "2,1"}, base) == "OMP_NUM_THREADS"  # nested levels: not a count
    assert differs({**base, "TORCH_LOGS": "dynamo"}, base) == "TORCH_LOGS"
    assert differs({**base, "PYTHONHASHSEED": "1"}, base) == "PYTHONHASHSEED"
    # The standard streams' encoding: a forked worker sets its streams up as Python's start-up would have (below),
    # but one Python would refuse to start with (an unknown codec or error handler) starts cold and says so there.
    assert differs({**base, "PYTHONIOENCODING": "ascii:backslashreplace"}, base) is None
    assert differs({**base, "PYTHONIOENCODING": "no-such-codec"}, base) == "PYTHONIOENCODING"
    assert differs({**base, "PYTHONIOENCODING": "utf-8:no-such-handler"}, base) == "PYTHONIOENCODING"


@pytest.mark.parametrize("encoding, shown", [("ascii", "--bogus-\\xe9"), (None, "--bogus-\u00e9")])
def test_a_worker_with_its_own_pythonioencoding_is_forked_and_writes_as_a_cold_one(warm_process, encoding, shown):
    """PYTHONIOENCODING decides how the worker's standard streams encode (here the usage error argparse writes to
    stderr, which Python's start-up gives the backslashreplace handler): forked, as a cold worker with it does."""
    argv = [sys.executable, "-m", WORKER, "--spec", "{}", "--bogus-\u00e9"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    env.update({"PYTHONIOENCODING": encoding} if encoding else {})
    cold = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    hot, why = warm.spawn(argv, env)
    assert hot is not None, why
    err, code = hot.stderr.read(), hot.wait(timeout=120)
    hot.release()
    assert code == cold.returncode == 2
    assert err == cold.stderr.decode("utf-8") and err.rstrip().endswith(shown), (err, cold.stderr)


def test_a_pointer_folder_others_can_read_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(warm, "_own", None)  # a command's view: it owns no warm process
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(tmp_path))
    (tmp_path / "warm").mkdir(mode=0o755)
    os.chmod(tmp_path / "warm", 0o755)
    paths, why = warm.find()
    assert paths == [] and "is not a directory of this user's alone (0700)" in why


def test_the_cli_uses_a_consoles_warm_process(warm_process, tmp_path):
    argv = [*PC, "run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2",
            "--steps", "2", "--warmup", "1", "--json"]
    data = warm_process.pointer.parent.parent  # the data folder the console's warm process is named in
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PERFCONSOLE_DATA_DIR": str(data)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data"]["environment"]["start"] == "warm"
    # The console script (its `#!` names the venv's `python3`, the warm process this `python`: one interpreter)
    script = Path(sys.executable).with_name("perfconsole")
    out = subprocess.run([str(script), *argv[3:]], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PERFCONSOLE_DATA_DIR": str(data)})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data"]["environment"]["start"] == "warm"
    # another data folder, where no console is up (the test's own names the xdist worker's warm process: conftest)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PERFCONSOLE_DATA_DIR": str(tmp_path / "no-console")})
    assert json.loads(out.stdout)["data"]["environment"]["start"] == "cold: no console or server is up"


PARENT = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {tests!r})
    from helpers import TINY
    from perfconsole.core.launch import warm
    from perfconsole.core.launch.launcher import Launch
    own = warm.start_own()
    assert own.wait_ready() is None
    launch = Launch(TINY.with_(steps=1000), env={{"PERFCONSOLE_FAULT": "slow:100"}})
    for event in launch.events():
        if event.type == "step":
            print(own.proc.pid, launch.pid, launch.start_how, own.dir, flush=True)
            time.sleep(600)
""")


@pytest.mark.parametrize("death", ["SIGKILL", "SIGTERM"])
def test_the_warm_process_and_its_runs_end_with_their_parent(death):
    tests = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(tests=tests)], stdout=subprocess.PIPE, text=True)
    try:
        server, worker, how, folder = parent.stdout.readline().split()
        assert how == "warm"
        procs = [psutil.Process(int(server)), psutil.Process(int(worker))]
        parent.send_signal(getattr(signal, death))
        deadline = time.monotonic() + 20
        while (alive := [p for p in procs if running(p)]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive, alive
        assert not os.path.exists(folder)  # its socket and the private folder that held it
    finally:
        parent.kill()
        parent.wait()


def test_turned_off_no_warm_process_is_started(monkeypatch):
    monkeypatch.setenv(warm.OFF_VAR, "off")
    assert warm.start_own() is None and warm.turned_off() == "PERFCONSOLE_WARM=off"


OWNER = textwrap.dedent("""
    import sys, time
    from perfconsole.core.launch import warm
    own = warm.start_own()
    assert own.wait_ready() is None
    print(own.proc.pid, own.dir, flush=True)
    time.sleep(600)
""")


def test_a_commands_run_outlives_the_console_that_owns_the_warm_process(tmp_path):
    """`perfconsole run` beside a console forks from the console's warm process; the console quitting mid-run loses
    none of the command's steps, and the warm process ends once that run has."""
    env = {**os.environ, "PERFCONSOLE_DATA_DIR": str(tmp_path)}
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, env=env)
    try:
        server_pid, folder = owner.stdout.readline().split()
        server = psutil.Process(int(server_pid))
        save = tmp_path / "run.json"
        cli = subprocess.Popen([*PC, "run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2",
                                "--warmup", "1", "--steps", "40", "--save", str(save)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**env, "PERFCONSOLE_FAULT": "slow:100"})
        deadline = time.monotonic() + 120
        while not [c for c in server.children() if running(c)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [c for c in server.children() if running(c)], "the command's run was not forked from the console's"
        owner.kill()  # the console goes, mid-run
        owner.wait()
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0, err[-2000:]
        doc = json.loads(save.read_text())["data"]
        assert doc["status"] == "ok" and len(doc["steps"]) == 40 and doc["environment"]["start"] == "warm"
        deadline = time.monotonic() + 20
        while running(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(server) and not os.path.exists(folder)
    finally:
        owner.kill()
        owner.wait()


def test_a_warm_process_kill_all_ended_is_replaced_before_it_is_reaped(warm_process):
    """Every way out of a console (and test_strays.py, earlier in an xdist worker) runs processes.kill_all, which
    SIGKILLs the warm process's group: until the kernel has torn it down, poll() says it runs, and a start_own
    that trusted it handed out a dying process (the clean-clone CI of ed9a447: the next runs found its socket
    reset). Its kill mark says it is gone at once. Last in the file: it replaces the fixture's process."""
    from perfconsole.core.launch import processes

    processes.kill_all()
    assert warm_process.wait_ready() == "the warm process has been killed"
    own = warm.start_own()
    assert own is not warm_process and own.wait_ready() is None
    assert warm_process.proc.poll() is not None  # the old one reaped by its replacement's start
    record, _, launch = launched()
    assert launch.start_how == "warm" and record.status == "ok"

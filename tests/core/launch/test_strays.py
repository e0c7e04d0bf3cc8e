"""Nothing a child starts outlives it: `nsys profile` starts its agent in a session of its own, out of the
worker's process group, and a console killed mid-run left it behind. Every process that carries a child's
mark (core.launch.processes.CHILD_MARK) ends when the child is killed or reaped, and a tool run to its end
(nsys stats) is killed with the others. Stand-ins here: a child that daemonises a `sleep` (double fork and
setsid), as nsys does its agent."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import psutil
import pytest

from perfconsole.core.launch import processes
from perfconsole.core.launch.processes import ChildProcess, run_to_end

# Prints the pid of a daemonised sleep (its parent has exited: it belongs to init, in a session of its own),
# then waits, or exits at once with "exit".
DAEMONISE = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "600"])
    os._exit(0)
os.wait()
time.sleep(0.2)
pid = [p.pid for p in __import__("psutil").process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "600"]
       and p.environ().get("PERFCONSOLE_CHILD") == os.environ["PERFCONSOLE_CHILD"]]
print(pid[0], flush=True)
if sys.argv[1:] != ["exit"]:
    time.sleep(600)
"""


def gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def daemonising_child(*args: str) -> tuple[ChildProcess, int]:
    child = ChildProcess()
    child.spawn([sys.executable, "-c", DAEMONISE, *args])
    pid = int(child.proc.stdout.readline())
    assert psutil.Process(pid).ppid() != child.proc.pid  # out of reach of the group and the tree
    return child, pid


@pytest.fixture
def cleanup():
    pids: list[int] = []
    yield pids
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


def test_killing_a_child_ends_what_it_daemonised(cleanup):
    child, stray = daemonising_child()
    cleanup.append(stray)
    child.kill()
    assert child.proc.wait(timeout=10) < 0
    assert gone(stray)


def test_a_child_that_ended_leaves_nothing_once_reaped(cleanup):
    child, stray = daemonising_child("exit")
    cleanup.append(stray)
    assert child.proc.wait(timeout=10) == 0
    assert not gone(stray, 0.3)  # still there after its parent's end: nsys's agent was
    child.forget()
    assert gone(stray)


@pytest.fixture
def own_children(monkeypatch):
    """kill_all kills, and _live lists, every child this process registered: here only the test's own. In a
    pytest-xdist worker they would take in the worker's warm process too (tests/conftest.py), which the next e2e test
    then waited for again, and which test_warm.py's fixture once got back dying (the clean-clone CI of ed9a447)."""
    monkeypatch.setattr(processes, "_live", set())


def test_kill_all_ends_a_tool_run_to_its_end_and_what_it_started(tmp_path, monkeypatch, own_children):
    said = tmp_path / "mark"
    monkeypatch.setenv("MARK_FILE", str(said))
    tool = [sys.executable, "-c", "import os, time; open(os.environ['MARK_FILE'], 'w').write("
                                  "os.environ['PERFCONSOLE_CHILD']); time.sleep(600)"]
    result: list[subprocess.CompletedProcess] = []
    t = threading.Thread(target=lambda: result.append(run_to_end(tool, 60)))
    t.start()
    deadline = time.monotonic() + 60
    while not (said.exists() and said.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    mark = said.read_text()
    assert processes.marked(mark)
    processes.kill_all()  # as the console's every way out does
    t.join(10)
    assert not t.is_alive() and result[0].returncode < 0
    assert processes.marked(mark) == []


def test_a_tool_past_its_timeout_is_killed(own_children):
    with pytest.raises(subprocess.TimeoutExpired):
        run_to_end([sys.executable, "-c", "import time; time.sleep(600)"], 0.5)
    assert not [c for c in processes._live if c.proc is not None and c.proc.poll() is None]


def test_a_tool_run_to_its_end_says_what_it_printed():
    done = run_to_end([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], 60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")

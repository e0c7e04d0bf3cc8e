"""SIGTERM (kill, timeout, schedulers) and SIGHUP (a dropped SSH session) end `run`, `sweep` and
`attention` the way Ctrl-C does: the child's process group is killed, what was measured is saved and
printed, and the exit code is 128 + the signal's number. Real processes throughout."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

import psutil
import pytest

from helpers import PC, gone_or_zombie

from perfconsole.core import store
from perfconsole.core.launch import warm



# The commands fork their workers from the xdist worker's warm process, which the test's data folder names
# (tests/conftest.py), as they would beside a console; the start-up test starts its worker cold, its moment being a
# worker that imports torch.
COLD = {"PERFCONSOLE_WARM": "off"}


def start(args: list[str], mark: str, slow_ms: int, cold: bool = False) -> subprocess.Popen:
    env = {**os.environ, **(COLD if cold else {}), "PERFCONSOLE_FAULT": f"slow:{slow_ms}", "PERFCONSOLE_TEST_MARK": mark}
    return subprocess.Popen([*PC, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def marked(mark: str) -> list[psutil.Process]:
    """Live processes of the test's command (zombies count as gone): those started with its mark in their
    environment (the command, a cold worker), and those the xdist worker's warm process forked, whose /proc environ
    is the warm process's (no other test of this xdist worker runs meanwhile)."""
    out = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("PERFCONSOLE_TEST_MARK") == mark and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.Error, OSError):
            pass
    own = warm._own
    if own is not None and own.proc is not None and own.proc.poll() is None:
        out += [p for p in psutil.Process(own.proc.pid).children() if not gone_or_zombie(p.pid)]
    return out


def cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""


def wait_for_stderr(p: subprocess.Popen, text: str, timeout: float = 120) -> list[str]:
    """Read the progress on stderr until a line holds `text`; the rest is read by communicate()."""
    seen = []
    deadline = time.monotonic() + timeout
    for line in p.stderr:
        seen.append(line)
        if text in line:
            return seen
        if time.monotonic() > deadline:
            break
    p.kill()
    pytest.fail(f"never saw {text!r} on stderr:\n{''.join(seen)}")


def finish(p: subprocess.Popen, mark: str) -> tuple[str, str]:
    out, err = p.communicate(timeout=60)
    assert not marked(mark), "a worker outlived the command"
    return out, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_run_saves_the_steps_measured_and_exits_128_plus_the_signal(tmp_path, sig):
    save = tmp_path / "r.json"
    mark = f"run-{sig.name}-{os.getpid()}-{time.monotonic_ns()}"
    p = start(["run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "1",
               "--steps", "400", "--save", str(save)], mark, slow_ms=30)
    wait_for_stderr(p, "step 3/400")
    assert marked(mark), "the worker should be running"
    p.send_signal(sig)
    out, err = finish(p, mark)
    assert p.returncode == 128 + sig, err
    rec = store.load(save)
    assert rec.status == "cancelled" and 3 <= len(rec.steps) < 400
    assert rec.summary is not None and rec.summary.total_ms.n == len(rec.steps)
    assert "cancelled" in out and "total" in out  # the summary of the measured steps is printed
    assert "Traceback" not in err


def test_run_json_prints_the_measured_steps_on_sigterm(tmp_path):
    mark = f"json-{os.getpid()}-{time.monotonic_ns()}"
    p = start(["run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "0",
               "--steps", "400", "--json"], mark, slow_ms=30)
    wait_for_stderr(p, "step 2/400")
    p.send_signal(signal.SIGTERM)
    out, err = finish(p, mark)
    assert p.returncode == 143, err
    run = store.loads(out)
    assert run.status == "cancelled" and len(run.steps) >= 2


def test_a_signal_while_the_worker_starts_up_saves_a_cancelled_run(tmp_path):
    save = tmp_path / "r.json"
    mark = f"early-{os.getpid()}-{time.monotonic_ns()}"
    p = start(["run", "--size", "tiny", "--device", "cpu", "--steps", "400", "--save", str(save)], mark, slow_ms=30,
              cold=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the worker exists: it is importing torch, nothing measured yet
        if any("perfconsole.core.measure.worker" in cmdline(w) for w in marked(mark)):
            break
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    _, err = finish(p, mark)
    assert p.returncode == 143, err
    rec = store.load(save)
    assert rec.status == "cancelled" and not rec.steps


# PERFCONSOLE_FAULT slow:MS sleeps before every step of a sweep cell, and twice in an attention cell
# (before its forward and its backward series): each cell takes a few seconds.
GRIDS = {
    "sweep": ["sweep", "--sizes", "tiny", "--ctx", "16,24,32", "--mode", "fwd", "--warmup", "1", "--steps", "5",
              "--batch", "2", "--device", "cpu", "--start-ahead", "3"],
    "attention": ["attention", "--d", "8", "--seq", "16,24,32", "--batch", "2", "--impl", "naive", "--warmup", "1",
                  "--iters", "5", "--device", "cpu", "--start-ahead", "3"],
}


@pytest.mark.parametrize("kind, sig", [("sweep", signal.SIGTERM), ("sweep", signal.SIGHUP),
                                       ("attention", signal.SIGTERM)])
def test_a_grid_keeps_finished_cells_and_leaves_no_process(tmp_path, kind, sig):
    save = tmp_path / "g.json"
    mark = f"{kind}-{sig.name}-{os.getpid()}-{time.monotonic_ns()}"
    # the second cell is running (and the third held) when the signal lands
    p = start([*GRIDS[kind], "--save", str(save)], mark, slow_ms=300 if kind == "sweep" else 1500)
    deadline = time.monotonic() + 120
    cells = "runs" if kind == "sweep" else "cells"
    while time.monotonic() < deadline:
        if save.exists() and any(c["status"] == "ok" for c in json.loads(save.read_text())["data"][cells]):
            break
        time.sleep(0.2)
    else:
        p.kill()
        pytest.fail("the first cell never finished")
    time.sleep(1.0)  # into the second cell
    p.send_signal(sig)
    out, err = finish(p, mark)
    assert p.returncode == 128 + sig, err
    rec = store.load(save)
    assert rec.status == "cancelled"
    statuses = [c.status for c in (rec.runs if kind == "sweep" else rec.cells)]
    assert statuses[0] == "ok" and statuses[-1] == "pending" and "cancelled" in statuses
    assert "not run" in out  # the grid is printed, with the cell that never started
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", ["run", "sweep"])
def test_a_dropped_terminal_then_sighup_still_saves_and_exits_129(tmp_path, kind):
    """What an SSH drop does: the terminal goes away (writes to it fail) and SIGHUP arrives."""
    import pty

    save = tmp_path / "s.json"
    mark = f"tty-{kind}-{os.getpid()}-{time.monotonic_ns()}"
    args = (["run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "1",
             "--steps", "400"] if kind == "run" else [*GRIDS["sweep"][:-2], "--start-ahead", "1"])
    master, slave = pty.openpty()
    env = {**os.environ, "PERFCONSOLE_FAULT": "slow:100", "PERFCONSOLE_TEST_MARK": mark}
    p = subprocess.Popen([*PC, *args, "--save", str(save)], stdin=subprocess.DEVNULL, stdout=slave, stderr=slave,
                         env=env)
    os.close(slave)
    seen = b""

    def measuring() -> bool:
        if kind == "run":
            return b"step 3/" in seen
        return save.exists() and json.loads(save.read_text())["data"]["runs"][0]["status"] == "ok"

    deadline = time.monotonic() + 120
    while not measuring():
        if time.monotonic() > deadline:
            p.kill()
            pytest.fail(f"never saw it measure:\n{seen.decode(errors='replace')}")
        if select.select([master], [], [], 0.1)[0]:
            seen += os.read(master, 4096)  # the terminal is read, as a live one would be
    os.close(master)  # the terminal is gone
    time.sleep(1.0)  # the command writes to it and fails
    p.send_signal(signal.SIGHUP)
    assert p.wait(timeout=60) == 129
    assert not marked(mark), "a worker outlived the command"
    rec = store.load(save)
    assert rec.status == "cancelled"
    if kind == "run":
        assert len(rec.steps) >= 3
    else:
        assert rec.runs[0].status == "ok"


def test_stop_passes_an_early_signal_on_and_a_second_idle_one_ends_the_process():
    from perfconsole.core.launch.processes import Stop

    stop, calls = Stop(), []
    assert stop.exit_code(3) == 3
    stop.handle(signal.SIGTERM)  # before the work started: remembered, nothing raised
    with stop.cancelling(lambda: calls.append("cancel")):
        assert calls == ["cancel"]  # passed on as soon as there is work to cancel
        stop.handle(signal.SIGHUP)  # while working: cancels again, keeps the first signal
    assert calls == ["cancel", "cancel"] and stop.exit_code(0) == 143
    with pytest.raises(SystemExit) as end:
        stop.handle(signal.SIGINT)  # nothing left to cancel: a second signal ends it at once
    assert end.value.code == 143

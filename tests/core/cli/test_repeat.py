"""`run --repeat N` and `sweep --repeat N` from the command line: real processes throughout."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from test_signals import finish, marked, start, wait_for_stderr

from perfconsole.core import store
from helpers import PC

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)

TINY = ["--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "1"]


def test_run_repeat_prints_the_spread_between_processes_and_saves_every_process(tmp_path):
    save = tmp_path / "r.json"
    out = subprocess.run([*PC, "run", *TINY, "--steps", "3", "--repeat", "2", "--save", str(save)],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    rec = store.load(save)
    assert rec.spec.repeat == 2 and [r.status for r in rec.replicates] == ["ok"] * 2
    assert len(rec.steps) == 6 and rec.summary.processes == 2
    assert rec.summary.between_processes["total_ms"].n == 2
    lines = out.stderr.splitlines()
    assert [line for line in lines if "process " in line and " of 2" in line] == ["process 1 of 2", "process 2 of 2"]
    assert "between 2 processes" in out.stdout.replace("\n", " ")
    # one process says what its interval covers: tests/core/cli/test_cli.py::test_table_output


def test_bad_repeat_is_one_line_exit_2():
    out = subprocess.run([*PC, "run", *TINY, "--repeat", "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.strip() == "perfconsole: error: repeat: must be from 1 to 100, not 0"


def test_sigterm_in_the_second_process_keeps_the_first_and_the_steps_of_the_second(tmp_path):
    save = tmp_path / "r.json"
    mark = f"repeat-{os.getpid()}-{time.monotonic_ns()}"
    p = start(["run", *TINY, "--steps", "40", "--repeat", "3", "--save", str(save)], mark, slow_ms=30)
    wait_for_stderr(p, "process 2 of 3")
    wait_for_stderr(p, "step 2/40")
    p.send_signal(signal.SIGTERM)
    finish(p, mark)
    assert p.returncode == 143
    rec = store.load(save)
    first, second = rec.replicates
    assert rec.status == "cancelled" and first.status == "ok" and len(first.steps) == 40
    assert second.status == "cancelled" and 2 <= len(second.steps) < 40
    assert len(rec.steps) == 40 + len(second.steps)
    assert not marked(mark)


def test_sweep_repeat_runs_each_cell_in_its_processes(tmp_path):
    save = tmp_path / "s.json"
    out = subprocess.run([*PC, "sweep", "--sizes", "tiny", "--ctx", "16,24", "--mode", "fwd", "--warmup", "1",
                          "--steps", "2", "--device", "cpu", "--repeat", "2", "--start-ahead", "1", "--save", str(save)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    sw = store.load(save)
    assert [len(r.replicates) for r in sw.runs] == [2, 2]

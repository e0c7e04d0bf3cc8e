"""`perfconsole compare`: variants of one spec, their replicate processes interleaved (A1 B1 A2 B2)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from test_signals import finish, start, wait_for_stderr

from perfconsole.core import store
from helpers import PC, TINY_ARGS

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)

TINY = [*TINY_ARGS, "--warmup", "1", "--steps", "3"]


def test_the_cli_runs_processes_in_rounds_and_prints_the_comparison_snapshot():
    out = subprocess.run([*PC, "compare", *TINY, "--vary", "precision=fp32,bf16", "--repeat", "2", "--json"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    c = store.loads(out.stdout)
    assert c.kind == "comparison" and [r.spec.precision for r in c.runs] == ["fp32", "bf16"]
    assert [len(r.replicates) for r in c.runs] == [2, 2] and c.between_processes()
    for record in c.runs:   # each record keeps its own processes
        assert record.status == "ok" and [r.status for r in record.replicates] == ["ok", "ok"]
        assert record.summary.between_processes["total_ms"].n == 2 and len(record.steps) == 6
    lines = [line for line in out.stderr.splitlines() if " process " in line]
    assert [line.split()[-4:] for line in lines] == [["process", "1", "of", "2"]] * 2 + [["process", "2", "of", "2"]] * 2
    # the table a terminal gets: the speedup is the ratio of the means it prints beside the medians
    from perfconsole.core.cli.compare import comparison_table

    table = comparison_table(c).plain().splitlines()
    header = next(line for line in table if line.startswith("run\t")).split("\t")
    assert header[2:4] == ["mean of the processes' median steps (ms)", "median of the processes' median steps (ms)"]
    base, other = (line.split("\t") for line in table if line[:2] in ("1:", "2:"))
    # what tells the runs apart comes first, so a terminal that cuts the name keeps it
    assert base[0].startswith("1: fp32 · tiny ctx16 b2") and other[0].startswith("2: bf16 · tiny ctx16 b2")
    means = [r.summary.interval_stat().mean for r in c.runs]
    assert [base[2], other[2]] == [f"{m:,.3f}" for m in means]
    ratio = means[0] / means[1]
    assert other[5].startswith(f"{max(ratio, 1 / ratio):.2f}x") or other[5].startswith("no significant"), other
    assert any("speedup = the baseline's mean of the processes' median steps / the run's" in line for line in table)
    # rounds: A1 B1 A2 B2
    assert ["fp32" in lines[0], "bf16" in lines[1], "fp32" in lines[2], "bf16" in lines[3]] == [True] * 4


def test_a_second_vary_is_refused_not_dropped():
    out = subprocess.run([*PC, "compare", *TINY, "--vary", "precision=fp32,bf16", "--vary", "ctx=16,32"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("perfconsole: error: --vary: one field at a time, not 2 "
                                  "(precision=fp32,bf16; ctx=16,32); `perfconsole sweep` crosses several")


def test_bad_vary_is_one_line_exit_2():
    for vary in ("colour=red,blue", "precision=fp32", "precision=fp32,fp64", "ctx=16,x"):
        out = subprocess.run([*PC, "compare", *TINY, "--vary", vary], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, (vary, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("perfconsole: error:")


def test_sigterm_keeps_what_was_measured(tmp_path):
    save = tmp_path / "c.json"
    mark = f"compare-{os.getpid()}-{time.monotonic_ns()}"
    p = start(["compare", *TINY[:-1], "40", "--mode", "train", "--vary", "precision=fp32,bf16", "--repeat", "2",
               "--save", str(save)], mark, slow_ms=30)
    wait_for_stderr(p, "bf16 train x2 process 1 of 2")
    wait_for_stderr(p, "step 3/40")
    p.send_signal(signal.SIGTERM)
    finish(p, mark)
    assert p.returncode == 143
    c = json.loads(save.read_text())["data"]
    first, second = c["runs"]
    assert [r["status"] for r in first["replicates"]] == ["ok"] and len(first["steps"]) == 40
    assert second["status"] == "cancelled" and 0 < len(second["steps"]) < 40

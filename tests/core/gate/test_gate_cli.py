"""`perfconsole gate` end to end on the CPU: a model file at two git revisions, the second with one more matmul
(scripts/bench_gate.py makes the repository), is a regression; the same revision twice is not; two interpreters;
the exit codes, the Markdown and JUnit files, and worktrees that are gone afterwards."""
from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from helpers import pc, script_module
from perfconsole.core import store
from perfconsole.core.reports.compare import Comparison

pytestmark = pytest.mark.e2e   # every test here starts the CLI and its workers (tests/tiers.py)

bench_gate = script_module("bench_gate")
SHORT = [a if a != "15" else "8" for a in bench_gate.FLAGS]  # 8 measured steps a process


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return bench_gate.make_repo(tmp_path_factory.mktemp("gate") / "repo")


def gate(repo, a: str, b: str, *extra: str, flags=SHORT) -> tuple[subprocess.CompletedProcess, object]:
    folder, *_ = repo
    out = pc("gate", "--model", f"{folder / 'model.py'}:build", "--rev", a, "--rev", b, *flags, "--json", *extra)
    assert out.returncode in (0, 1, 3), out.stderr
    return out, store.loads(out.stdout)


def test_one_more_matmul_is_a_regression_in_paired_mode_and_the_outputs_say_so(repo, tmp_path):
    folder, base, slower = repo
    md, xml = tmp_path / "summary.md", tmp_path / "junit.xml"
    md.write_text("earlier step\n")
    # bench_gate's own flags (15 steps a process) and a budget for a machine loaded by other work: the gate
    # stops as soon as it is decided (seconds on a quiet machine)
    out, g = gate(repo, base, slower, "--paired", "--budget", "240s", "--markdown", str(md), "--junit", str(xml),
                  flags=bench_gate.FLAGS)
    assert g.kind == "gate" and g.mode == "paired" and out.returncode == 1 and g.verdict == "regression"
    step = g.verdicts[0]
    assert step.metric == "step time" and step.verdict == "regression" and step.low > 1.03
    assert [p["revision"] for p in g.programs] == [base, slower]
    assert all(len(r.replicates) == g.rounds and r.status == "ok" for r in g.runs)
    assert [v.verdict for v in g.verdicts[1:]] == ["unmeasured", "unmeasured"]  # paired mode measures no memory
    # the Markdown summary is appended to what the job wrote before, the JUnit file parses, a case per metric
    text = md.read_text()
    assert text.startswith("earlier step\n## perfconsole gate: **regression**")
    assert "| step time |" in text and "**regression**" in text
    suite = ET.parse(xml).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["step time", "peak allocated", "peak reserved"] and suite.get("failures") == "1"
    assert cases["step time"].find("failure") is not None and cases["peak allocated"].find("skipped") is not None
    # no worktree is left behind
    trees = subprocess.run(["git", "worktree", "list"], cwd=folder, capture_output=True, text=True).stdout
    assert trees.count("\n") == 1, trees


def test_the_same_revision_twice_in_processes_is_no_regression(repo):
    folder, base, _ = repo
    out, g = gate(repo, base, base, "--budget", "3", "--metric", "tokens_per_s")
    assert g.mode == "processes" and g.rounds == 3 and g.stopped in ("decided", "budget")
    assert g.verdict != "regression" and out.returncode == g.exit_code() and out.returncode in (0, 3)
    assert [v.metric for v in g.verdicts] == ["step time", "peak allocated", "peak reserved", "tokens_per_s"]
    assert all(len(r.replicates) == 3 for r in g.runs) and Comparison(g.runs).between_processes()
    if g.verdict == "inconclusive":  # the exit code an inconclusive gate gets is the user's
        again = pc("gate", "--model", f"{folder / 'model.py'}:build", "--rev", base, "--rev", base, *SHORT,
                   "--budget", "3", "--inconclusive-exit", "0")
        assert again.returncode == 0 or "INCONCLUSIVE" not in again.stdout


def test_two_interpreters_each_run_their_processes(tmp_path):
    python = tmp_path / "python"  # another environment: this interpreter with a variable of its own set
    python.write_text(f'#!/bin/sh\nPERFCONSOLE_GATE_ENV=b exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    python = str(python)
    out = pc("gate", "--python", sys.executable, "--python", python, "--size", "tiny", "--device", "cpu", "--ctx", "16",
             "--batch", "2", "--warmup", "1", "--steps", "4", "--budget", "3", "--json")
    assert out.returncode in (0, 1, 3), out.stderr
    g = store.loads(out.stdout)
    assert [p["python"] for p in g.programs] == [sys.executable, python]
    assert [len(r.replicates) for r in g.runs] == [3, 3] and g.rounds == 3
    assert json.loads(out.stdout)["data"]["interval_method"].startswith("95% log-ratio t-interval over rounds")


@pytest.mark.parametrize("args, said", [
    (["--rev", "HEAD"], "--rev: give it twice"),
    (["--vary", "precision=fp32,bf16", "--python", sys.executable], "exactly one of"),
    (["--vary", "precision=fp32,bf16", "--threshold", "64MiB"], "--threshold: give a percentage"),
    (["--vary", "precision=fp32,bf16", "--budget", "soon"], "--budget: give seconds"),
    (["--python", sys.executable, "--python", sys.executable, "--paired"], "--paired runs both programs in one process"),
    (["--rev", "HEAD", "--rev", "no-such-rev", "--model", "model.py:build"], "--rev no-such-rev: not a commit"),
    (["--rev", "HEAD", "--rev=--output=x", "--model", "model.py:build"], "--rev '--output=x': not a revision name"),
    (["--rev", "HEAD", "--rev", "HEAD", "--model", "/model.py:build"], "--rev: /model.py is not inside a git repository"),
    (["--size", "tiny", "--vary", "device=cpu,cuda", "--paired"], "--paired: both programs run in one process")])
def test_bad_input_is_one_line_and_exit_2(repo, args, said):
    folder, *_ = repo
    out = pc("gate", "--device", "cpu", *args, cwd=folder)
    assert out.returncode == 2 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr

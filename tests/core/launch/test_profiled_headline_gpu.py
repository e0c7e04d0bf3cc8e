"""A profiled run's headline is the program without the profiler, on the GPU machine.

An eager, host-bound spec (`large`, fp16 train, ctx 512, batch 4: on an H100 the host sets the pace) runs in
three rounds of a plain run, an nsys run and a torch-profiler run, each a fresh launch as `perfconsole run`
makes it (core.launch.replicates.make_launch). The median of each profiler's three headlines is within 3 % of
the median of the three plain ones. Under nsys the headline is a plain process's by design (core.launch.profiled),
and the capture process's own quiet steps say what nsys cost outside its capture; the torch profiler starts
inside the process for its profiled steps only, so its headline is its own quiet steps. No nsys agent is left.

A 3 % comparison needs plain processes that agree to 3 % among themselves. On the first H100 they did not
(125.7-178.6 ms for one spec: docs/results/nsys_headline_h100.md), and three pairs cannot tell 3 % apart
there: where the headlines miss 3 % and the plain processes are further apart than that, the comparison is an
expected failure that states both spreads; where the plain processes agree, a miss fails.

PERFCONSOLE_EVIDENCE_DIR, where set, receives every run's figures (headline_runs.json).

    python -m pytest -m gpu tests/core/launch/test_profiled_headline_gpu.py -v -s
"""
from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from pathlib import Path

import psutil
import pytest

from perfconsole.core.launch.replicates import make_launch
from perfconsole.core.record import RunRecord
from perfconsole.core.spec import RunSpec

pytestmark = pytest.mark.gpu

SPEC = RunSpec(size="large", ctx=512, batch=4, precision="fp16", mode="train", device="cuda", warmup=3, steps=10)
ROUNDS = 3
WITHIN = 0.03
AGENT = "--start-agent"
AGENT_GRACE_S = 5.0  # after a run: an nsys agent still there then has outlived it


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


TAG = "PERFCONSOLE_HEADLINE_TEST"  # in this module's runs' environment, so in what they start


def _agents(tag: str) -> list[str]:
    """The nsys agents this module's runs may have started: those whose environment carries `tag`, and those
    with no environment left to read. An agent of another test (the split runs two parts side by side, each
    with nsys tests) has its own environment, without `tag`: on 2x H200 one was met after a torch round here,
    which starts no nsys."""
    found = []
    for p in psutil.process_iter():
        try:
            if AGENT not in p.cmdline():
                continue
            env = p.environ()
        except psutil.Error:
            continue
        if env.get(TAG) == tag or not env:
            found.append(" ".join(p.cmdline())[:160])
    return found


def _left_after(tag: str, before: set[str], grace: float) -> list[str]:
    """The nsys agents not there before the run that are still there `grace` seconds after it ended (polled: one
    that is on its way out is not left behind; on an H200 one was still listed 1 s after its run)."""
    deadline = time.monotonic() + grace
    while True:
        left = [a for a in _agents(tag) if a not in before]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)


def _figures(kind: str, index: int, record: RunRecord, seconds: float, agents: list[str]) -> dict:
    o = (record.profile.overhead if record.profile else None) or {}
    return {"kind": kind, "round": index + 1, "status": record.status, "seconds": round(seconds, 1),
            "headline_ms": record.summary.total_ms.median if record.summary else None,
            "steps_ms": [round(s.total_ms, 3) for s in record.steps],
            "profiler": record.profile.profiler if record.profile else None,
            "plain_ms": o.get("plain_ms"), "quiet_ms": o.get("quiet_ms"), "profiled_ms": o.get("profiled_ms"),
            "quiet_step_ms": [round(v, 3) for v in o.get("quiet_step_ms") or []],
            "plain_process_ms": o.get("plain_process_ms") or [],
            "tables": sorted(record.profile.tables) if record.profile else [],
            "error": record.error.message if record.error else None, "agents_left": agents}


@pytest.fixture(scope="module")
def rounds(tmp_path_factory) -> list[dict]:
    if not _cuda():
        pytest.skip("needs a CUDA GPU")
    from perfconsole.core.profiling.locate import find_nsys

    if find_nsys(os.environ.get("PERFCONSOLE_NSYS")) is None:
        pytest.skip("nsys not found (PERFCONSOLE_NSYS, PATH, /opt/nvidia, /usr/local/cuda*)")
    root = tmp_path_factory.mktemp("headline")
    runs: list[dict] = []
    tag = uuid.uuid4().hex
    agents_before = set(_agents(tag))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PERFCONSOLE_DATA_DIR", str(root / "data"))  # one data folder: the peaks are measured once
        mp.setenv(TAG, tag)
        for r in range(ROUNDS):
            for kind in ("none", "nsys", "torch"):
                spec = SPEC.with_(profile=kind)
                started = time.monotonic()
                launch = make_launch(spec, out_dir=root / f"{kind}-{r + 1}")
                record = RunRecord(spec)
                launch.start()
                for event in launch.events():
                    record.apply(event)
                seconds = time.monotonic() - started
                left = _left_after(tag, agents_before, AGENT_GRACE_S if kind == "nsys" else 0.0)
                runs.append(_figures(kind, r, record, seconds, left))
                print(json.dumps({k: v for k, v in runs[-1].items() if k not in ("steps_ms", "quiet_step_ms")}))
    evidence = os.environ.get("PERFCONSOLE_EVIDENCE_DIR")
    if evidence:
        Path(evidence).mkdir(parents=True, exist_ok=True)
        (Path(evidence) / "headline_runs.json").write_text(json.dumps({"spec": SPEC.to_dict(), "runs": runs}, indent=1))
    return runs


def _medians(runs: list[dict], kind: str) -> list[float]:
    return [r["headline_ms"] for r in runs if r["kind"] == kind and r["headline_ms"] is not None]


def test_every_run_finished_and_no_nsys_agent_is_left(rounds):
    assert [r["status"] for r in rounds] == ["ok"] * 3 * ROUNDS, [(r["kind"], r["error"]) for r in rounds]
    assert all(len(r["steps_ms"]) == SPEC.steps for r in rounds)
    assert not [r["agents_left"] for r in rounds if r["agents_left"]]


def _judge(plain: list[float], other: list[float], what: str) -> None:
    """Medians within WITHIN; where they are not and the plain processes themselves are further apart than
    WITHIN, an expected failure in figures (the machine cannot judge 3 % with three pairs)."""
    assert len(plain) == len(other) == ROUNDS
    off = statistics.median(other) / statistics.median(plain) - 1
    if abs(off) <= WITHIN:
        return
    spread = max(plain) / min(plain) - 1
    figures = (f"{what} headline median {statistics.median(other):.2f} ms against plain {statistics.median(plain):.2f} "
               f"({off:+.1%}); plain processes {min(plain):.2f}-{max(plain):.2f} ms ({spread:.1%} apart), "
               f"{what} {min(other):.2f}-{max(other):.2f} ms")
    if spread > WITHIN:
        pytest.xfail(f"{figures}: plain processes of this spec differ by more than {WITHIN:.0%} among themselves")
    pytest.fail(figures)


def test_an_nsys_runs_headline_is_a_plain_runs(rounds):
    for r in (r for r in rounds if r["kind"] == "nsys"):
        assert r["profiler"] == "nsys" and "cuda_gpu_kern_sum" in r["tables"]
        assert r["plain_ms"] == pytest.approx(r["headline_ms"])  # the headline is the plain process's
        # the figures keep the quiet steps to 3 decimals: their median within that rounding of quiet_ms
        assert len(r["quiet_step_ms"]) == SPEC.steps
        assert r["quiet_ms"] == pytest.approx(statistics.median(r["quiet_step_ms"]), abs=1e-3)
        assert r["plain_process_ms"] == pytest.approx([r["headline_ms"]])
    _judge(_medians(rounds, "none"), _medians(rounds, "nsys"), "nsys")


def test_a_torch_profiled_runs_headline_is_a_plain_runs(rounds):
    assert all(r["profiler"] == "torch" for r in rounds if r["kind"] == "torch")
    _judge(_medians(rounds, "none"), _medians(rounds, "torch"), "torch")

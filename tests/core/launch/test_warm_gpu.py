"""On a GPU, a run forked from a warm process (core.launch.warm) is the run a cold `python -m` worker makes: the
worker initialises CUDA after the fork (the warm process never does), measures the same steps, and leaves the warm
process serving, still without CUDA. The CPU suite's test_warm.py shows the same on the CPU; this is the device the
warm path is for. Cold and warm runs alternate, twice each, so a drift of the card's clocks falls on both.

PERFCONSOLE_EVIDENCE_DIR, where set, receives every run's figures (warm_gpu_runs.json)."""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest

from perfconsole.core.launch import warm
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

pytestmark = [pytest.mark.gpu, pytest.mark.e2e]

SPEC = RunSpec(size="small", ctx=256, batch=4, device="cuda", precision="bf16", mode="train", warmup=3, steps=20,
               seed=1234)
WITHIN = 0.10  # warm and cold median steps agree within this, where processes of one start do among themselves


def _launched() -> tuple[RunRecord, Launch, float]:
    """The run's record, its launch, and the seconds from the launch to its first step event (warm-up included)."""
    launch, record, first = Launch(SPEC), RunRecord(SPEC), None
    t0 = time.monotonic()
    launch.start()
    for event in launch.events():
        if event.type == "step" and first is None:
            first = time.monotonic() - t0
        record.apply(event)
    return record, launch, first if first is not None else float("nan")


def test_a_forked_cuda_run_is_the_same_program_as_a_cold_one_and_leaves_the_warm_process_without_cuda(monkeypatch):
    own = warm.start_own()
    assert own is not None and own.wait_ready() is None, list(own.stderr_tail)
    runs = []
    try:
        for how in ("cold", "warm", "cold", "warm"):
            with monkeypatch.context() as mp:  # read by the launching process, as a user's PERFCONSOLE_WARM=off is
                if how == "cold":
                    mp.setenv(warm.OFF_VAR, "off")
                record, launch, first_s = _launched()
            assert record.status == "ok", record.error
            runs.append((how, record, launch, first_s))
        # The warm process served them without initialising CUDA itself: its greeting says it may still fork.
        sock, hello = warm._connect(own.socket)
        sock.close()
        assert not hello.get("why_not"), hello
    finally:
        warm.stop_own()
    cold = [r for r in runs if r[0] == "cold"]
    hot = [r for r in runs if r[0] == "warm"]
    assert [launch.start_how for _, _, launch, _ in cold] == ["cold: PERFCONSOLE_WARM=off"] * 2
    assert [(launch.start_how, rec.environment["start"]) for _, rec, launch, _ in hot] == [("warm", "warm")] * 2
    a, b = cold[0][1], hot[0][1]
    assert a.to_dict().keys() == b.to_dict().keys()
    assert {k: v for k, v in a.environment.items() if k != "start"} == \
           {k: v for k, v in b.environment.items() if k != "start"}
    assert {**a.model, "cached": None} == {**b.model, "cached": None}
    # The same seed, the same kernels: the same losses, to bf16's rounding of a backward that may sum atomically.
    for (_, c, _, _), (_, h, _, _) in zip(cold, hot):
        cl, hl = [s.loss for s in c.warmup_steps + c.steps], [s.loss for s in h.warmup_steps + h.steps]
        assert len(cl) == len(hl) == SPEC.warmup + SPEC.steps
        assert hl == pytest.approx(cl, rel=2e-2), (cl, hl)
    med = {how: statistics.median(r.summary.total_ms.median for h, r, _, _ in runs if h == how)
           for how in ("cold", "warm")}
    # It starts sooner: the first step of a forked worker waits for CUDA, not for torch's imports too.
    first = {how: statistics.median(f for h, _, _, f in runs if h == how) for how in ("cold", "warm")}
    assert first["warm"] < first["cold"], first
    evidence = os.environ.get("PERFCONSOLE_EVIDENCE_DIR")
    if evidence:
        out = Path(evidence) / "warm_gpu_runs.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "spec": SPEC.to_dict(),
            "runs": [{"start": launch.start_how, "median_step_ms": rec.summary.total_ms.median,
                      "first_step_s": round(f, 3), "losses": [s.loss for s in rec.warmup_steps + rec.steps],
                      "gpu": rec.environment.get("gpu_name")}
                     for _, rec, launch, f in runs],
            "median_step_ms": med, "first_step_s": first}, indent=1))
    # The same step time: warm and cold medians within 10 % of each other (a fork saves imports, not kernels). These
    # steps are paced by the host, so a host whose processes of one start differ by more than that among themselves
    # cannot tell a 10 % difference: the test then says so in figures (xfail) rather than pass or fail on noise.
    off = med["warm"] / med["cold"] - 1
    if abs(off) < WITHIN:
        return
    each = [(h, r.summary.total_ms.median) for h, r, _, _ in runs]
    spread = max(max(ms) / min(ms) - 1 for ms in ([m for h, m in each if h == how] for how in ("cold", "warm")))
    figures = (f"warm median step {med['warm']:.2f} ms against cold {med['cold']:.2f} ms ({off:+.1%}); the runs in "
               f"turn: {', '.join(f'{h} {m:.2f}' for h, m in each)} ms; processes of one start up to {spread:.1%} apart")
    if spread > WITHIN:
        pytest.xfail(f"{figures}: more than {WITHIN:.0%}, so this host cannot tell the difference")
    pytest.fail(figures)



# Far more than an 80 GB card holds: 2.7B's fp32 weights, gradients and AdamW's state are 43 GB before the first
# activation, and batch 64 at ctx 2048 asks for hundreds of GB more in the first step's forward.
TOO_BIG = RunSpec(size="2.7B", ctx=2048, batch=64, device="cuda", precision="fp32", mode="train", warmup=1, steps=1)


def test_a_forked_cuda_run_out_of_memory_or_killed_leaves_the_warm_process_serving():
    """A forked worker that really runs out of GPU memory is an `oom` run, one killed mid-step (SIGKILL to its group)
    is cancelled; after each the warm process, still without CUDA, forks the next run, which runs."""
    own = warm.start_own()
    assert own is not None and own.wait_ready() is None, list(own.stderr_tail)
    try:
        launch, record = Launch(TOO_BIG), RunRecord(TOO_BIG)
        for event in launch.events():
            record.apply(event)
        assert launch.start_how == "warm"
        assert record.status == "oom", record.error
        assert "out of memory" in record.error.message.lower(), record.error
        long = SPEC.with_(steps=2000)
        launch, record = Launch(long), RunRecord(long)
        for event in launch.events():
            record.apply(event)
            if event.type == "step" and not event.warmup:
                launch.kill()
        assert launch.start_how == "warm" and record.status == "cancelled" and record.steps
        after, again, _ = _launched()
        assert again.start_how == "warm" and after.status == "ok", after.error
        assert len(after.steps) == SPEC.steps
        sock, hello = warm._connect(own.socket)
        sock.close()
        assert not hello.get("why_not"), hello   # never initialised CUDA: it may still fork
    finally:
        warm.stop_own()

"""Data-parallel jobs on two GPUs (NCCL): run on the lent multi-GPU machine with `pytest -m gpu`."""
from __future__ import annotations

import os

import pytest

from perfconsole.core.grids.sweep import SweepRecord, SweepRunner, SweepSpec
from perfconsole.core.launch import warm
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.profiling.analyses import category_shares
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.core.telemetry.nvml import visible_gpus

pytestmark = [pytest.mark.gpu, pytest.mark.two_gpus,
              pytest.mark.skipif(len(visible_gpus()) < 2, reason="needs two GPUs")]

JOB = RunSpec(size="small", ctx=256, batch=4, precision="bf16", mode="train", warmup=2, steps=5, device="cuda",
              attention="sdpa", nproc=2, parallel="ddp")


def run(spec: RunSpec, env=None, out_dir=None) -> RunRecord:
    record = RunRecord(spec)
    for event in Launch(spec, env=env, out_dir=out_dir).events():
        record.apply(event)
    return record


def test_ddp_on_two_gpus_times_nccl_and_prices_exposed_communication():
    r = run(JOB)
    assert r.status == "ok", r.error
    assert len(r.ranks) == 2 and all(s.comm_ms is None for rank in r.ranks for s in rank.steps)  # quiet steps
    assert all(c > 0 for c in r.comm_steps["comm_ms"])
    sm = r.summary
    assert 0 < sm.comm_share < 1 and sm.comm_free_ms is not None and sm.comm_free_ms > 0
    assert sm.comm_free_ms < sm.total_ms.median * 1.2  # a step without the all-reduce is not slower
    assert sm.comm_timer_cost is not None and sm.comm_timer_cost > 0.8
    c = r.collectives  # the step's fp32 gradient buckets all-reduced alone, and the link at 1 GiB
    assert c["dtype"] == "float32" and c["bytes"] == 4 * r.model["params"] and c["buckets"] > 1
    assert c["alone_ms"] > 0 and c["link_bytes"] == 1 << 30 and c["link_busbw_gbps"] > 10


@pytest.mark.parametrize("changes", [{"parallel": "fsdp"}, {"parallel": "fsdp", "fsdp_bf16": True, "reshard": False},
                                     {"comm_hook": "bf16", "bucket_mb": 100.0, "grad_as_bucket_view": True}])
def test_fsdp_and_the_ddp_settings_run_on_two_gpus(changes):
    r = run(JOB.with_(**changes))
    assert r.status == "ok", r.error
    assert len(r.ranks) == 2
    c = r.collectives  # FSDP: all-gathers and reduce-scatters (bf16 with fsdp_bf16); DDP's bf16 hook: bf16
    assert c["alone_ms"] > 0 and c["link_busbw_gbps"] > 10, c
    fp32 = changes.get("parallel") == "fsdp" and not changes.get("fsdp_bf16")
    assert c["dtype"] == ("float32" if fp32 else "bfloat16"), c
    if not changes.get("reshard", True):
        assert c["ops"]["all_gather"] == c["ops"]["reduce_scatter"], c  # each unit gathered once


def test_torch_profile_gives_nccl_kernels_and_their_overlap(tmp_path):
    r = run(JOB.with_(profile="torch"), out_dir=tmp_path)
    assert r.status == "ok", r.error
    shares = {c.category: c for c in category_shares(r.profile.tables)}
    assert "communication" in shares
    assert [o["rank"] for o in r.overlap] == [0, 1]
    for o in r.overlap:
        assert o["comm_kernels"] > 0 and 0 <= o["overlap_share"] <= 1


def test_an_oom_on_rank_1_ends_the_job_naming_it():
    r = run(JOB, env={"PERFCONSOLE_RANK_FAULT": "1:oom:3"})
    assert r.status == "oom" and r.error.message.startswith("rank 1: ")
    # Step 2 was still in flight when step 3 failed on rank 1: the ranks cannot gather after a failure, so
    # a job keeps the steps gathered before it (none here), where one process would salvage that step too.
    assert len(r.steps) <= 1


def test_a_sweep_runs_two_cells_at_once_on_two_gpus():
    spec = SweepSpec(JOB.with_(nproc=1, parallel="none", steps=3), ("small",), (128, 256), ("bf16",), ("train",),
                     (1,)).validate()
    record = SweepRecord.new(spec)
    SweepRunner(record, gpus=[str(g) for g in visible_gpus()[:2]]).run()
    assert all(c.status == "ok" for c in record.runs)
    assert sorted(record.cell_gpus) == sorted(str(g) for g in visible_gpus()[:2])


def test_nsys_gives_one_capture_per_rank_and_rank_0s_nccl_kernels(tmp_path):
    from perfconsole.core.profiling.locate import find_nsys

    if find_nsys(None) is None:
        pytest.skip("nsys is not installed")
    r = run(JOB.with_(profile="nsys", steps=3), out_dir=tmp_path)
    assert r.status == "ok", r.error
    assert r.profile.profiler == "nsys"
    for k in (0, 1):
        assert (tmp_path / f"profile-rank{k}.nsys-rep").is_file()
    assert any(f.endswith("profile-rank1.nsys-rep") for f in r.profile.files)
    assert "communication" in {c.category for c in category_shares(r.profile.tables)}


WARM_JOB = RunSpec(size="small", ctx=256, batch=4, device="cuda", precision="bf16", mode="train", warmup=3, steps=10,
                   seed=1234, nproc=2, parallel="ddp")


def test_a_ddp_job_s_ranks_forked_on_two_gpus_are_the_ranks_a_cold_job_runs(monkeypatch):
    """torchrun starts each rank as core.launch.warm_rank, which has the warm process fork it: each rank initialises
    CUDA and NCCL after the fork, with the OMP_NUM_THREADS torchrun gave it, and the job is the cold job."""
    own = warm.start_own()
    assert own is not None and own.wait_ready() is None, list(own.stderr_tail)
    runs = {}
    try:
        for how in ("cold", "warm"):
            with monkeypatch.context() as mp:
                if how == "cold":
                    mp.setenv(warm.OFF_VAR, "off")
                record = RunRecord(WARM_JOB)
                for event in Launch(WARM_JOB).events():
                    record.apply(event)
            assert record.status == "ok", record.error
            runs[how] = record
        sock, hello = warm._connect(own.socket)
        sock.close()
        assert not hello.get("why_not"), hello
    finally:
        warm.stop_own()
    cold, hot = runs["cold"], runs["warm"]
    assert (cold.environment["start"], hot.environment["start"]) == ("cold: PERFCONSOLE_WARM=off", "warm")
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))  # torchrun's 1 where the machine sets none
    assert cold.environment["threads"] == hot.environment["threads"] == threads
    assert len(hot.ranks) == 2 and all(c > 0 for c in hot.comm_steps["comm_ms"])
    cl, hl = [s.loss for s in cold.warmup_steps + cold.steps], [s.loss for s in hot.warmup_steps + hot.steps]
    assert len(cl) == len(hl) == WARM_JOB.warmup + WARM_JOB.steps and hl == pytest.approx(cl, rel=2e-2), (cl, hl)

"""Data-parallel jobs for real: torchrun starts two gloo processes of the worker on the CPU."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import psutil
import pytest
from helpers import running

from perfconsole.core import events as ev
from perfconsole.core.launch import warm
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.parallel import job_line
from perfconsole.core.reports.run import markdown
from perfconsole.core.settings import RunSpec
from perfconsole.model.config import config_for

JOB = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=3, mode="train", nproc=2, parallel="ddp")


def run_job(spec: RunSpec, env: dict[str, str] | None = None, on_event=None):
    """Run the job; returns the record, the events and every process seen under torchrun, and the ranks' workers
    the xdist worker's warm process forked for it (tests/conftest.py: no other test of this worker runs meanwhile)."""
    launch = Launch(spec, env=env)
    record, seen, procs = RunRecord(spec), [], {}
    server = warm._own.proc.pid if warm._own is not None and warm._own.proc is not None else None

    for event in launch.events():
        if launch.proc is not None and launch.proc.poll() is None:
            try:
                root = psutil.Process(launch.proc.pid)
                forked = psutil.Process(server).children() if server is not None else []
                for p in [root, *root.children(recursive=True), *forked]:
                    procs[p.pid] = p
            except psutil.NoSuchProcess:
                pass
        seen.append(event)
        record.apply(event)
        if on_event:
            on_event(launch, record, event)
    return record, seen, list(procs.values())


def assert_none_left(procs: list[psutil.Process]) -> None:
    assert len(procs) >= 3, "torchrun and its two ranks were seen"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in procs):
        time.sleep(0.1)
    left = [p.pid for p in procs if running(p)]
    assert not left, f"processes left behind: {left}"


@pytest.mark.e2e
def test_ddp_job_has_every_rank_and_measures_communication():
    record, seen, procs = run_job(JOB, env={"NCCL_PROTO": "Simple"})
    assert record.status == "ok", record.error
    assert record.environment["start"] == "warm"  # each rank forked (core.launch.warm_rank)
    # the variables that decide how collectives run reach the forked ranks and their record, and its export
    assert record.environment["comm_env"]["NCCL_PROTO"] == "Simple" and record.environment["nccl"] is None
    assert "- collectives: no NCCL (gloo); " in markdown(record) and "NCCL_PROTO=Simple" in markdown(record)
    assert [r.rank for r in record.ranks] == [0, 1]
    for r in record.ranks:
        assert [s.index for s in r.steps] == [1, 2, 3]
        # The quiet steps are DDP as configured: nothing timed their collectives.
        assert all(s.comm_ms is None and s.rank == r.rank for s in r.steps)
        assert r.summary is not None
    # The collectives were timed in steps of their own, and what that cost is reported.
    assert len(record.comm_steps["total_ms"]) == 3 and all(c > 0 for c in record.comm_steps["comm_ms"])
    for i, step in enumerate(record.steps):  # the job's step is the slowest rank's
        slowest = max(record.ranks, key=lambda r: r.steps[i].total_ms)
        assert step.rank == slowest.rank and step.total_ms == slowest.steps[i].total_ms
    sm = record.summary
    assert sm.world_size == 2 and 0 < sm.comm_share
    assert sm.comm_ms.median == pytest.approx(sorted(record.comm_steps["comm_ms"])[1])
    assert sm.comm_timer_cost == pytest.approx(sorted(record.comm_steps["total_ms"])[1] / sm.total_ms.median)
    assert sm.tokens_per_s == pytest.approx(2 * JOB.batch * JOB.ctx / (sm.total_ms.mean / 1e3))
    assert len(record.comm_free_ms) == 3 and sm.comm_free_ms is not None and sm.exposed_comm_ms is not None
    assert sum(sm.slowest_rank.values()) == 3
    # The step's all-reduces alone: DDP's buckets of fp32 gradients, every parameter's once.
    c = record.collectives
    assert c["source"] == "DDP's buckets" and c["dtype"] == "float32" and c["bytes"] == 4 * record.model["params"]
    assert c["alone_ms"] > 0 and c["busbw_gbps"] == pytest.approx(c["bytes"] / (c["alone_ms"] * 1e6))  # 2(n-1)/n = 1
    assert c["link_bytes"] == 16 << 20 and c["link_busbw_gbps"] == pytest.approx((16 << 20) / (c["link_ms"] * 1e6))
    line = job_line(record)
    assert "collectives alone" in line and "at 16 MiB" in line
    if sm.exposed_comm_ms >= 0:
        assert f"exposed {sm.exposed_comm_ms / c['alone_ms']:.2f}x the collectives alone" in line
    else:  # the steps without the all-reduce were the slower ones (host noise on a loaded CPU): no ratio, words
        assert "exposed: none measurable" in line and "x the collectives alone" not in line, line
    doc = record.to_dict()
    assert doc["world_size"] == 2 and doc["parallel"] == "ddp" and len(doc["ranks"]) == 2
    again = RunRecord.from_dict(json.loads(json.dumps(doc)))
    assert again.collectives == record.collectives and again.comm_steps == record.comm_steps and again.recompute_summary().comm_ms == sm.comm_ms
    assert_none_left(procs)


@pytest.mark.e2e
def test_ddp_knobs_reach_ddp():
    spec = JOB.with_(bucket_mb=0.01, grad_as_bucket_view=True, comm_hook="bf16", steps=2)
    record, _, _ = run_job(spec)
    assert record.status == "ok", record.error
    assert len(record.comm_steps["comm_ms"]) == 2 and all(c > 0 for c in record.comm_steps["comm_ms"])
    c = record.collectives  # the bf16 hook sends half the bytes, in buckets of 0.01 MB
    assert c["dtype"] == "bfloat16" and c["bytes"] == 2 * record.model["params"] and c["buckets"] > 10


@pytest.mark.e2e
def test_fsdp_job_runs_on_gloo_without_a_comm_hook():
    record, seen, procs = run_job(JOB.with_(parallel="fsdp", steps=2))
    assert record.status == "ok", record.error
    assert len(record.ranks) == 2 and all(s.comm_ms is None for r in record.ranks for s in r.steps)
    assert record.summary.comm_share is None and record.comm_free_ms is None and record.comm_steps is None
    # FSDP's collectives alone: per block two all-gathers and a reduce-scatter, the root's gathered once.
    c, cfg = record.collectives, config_for("tiny", JOB.ctx)
    assert c["source"] == "FSDP's units" and c["units"] == cfg.n_layers + 1, c
    assert c["ops"] == {"all_gather": 2 * cfg.n_layers + 1, "reduce_scatter": cfg.n_layers + 1}, c
    root = 2 * cfg.vocab_size * cfg.d_model + cfg.d_model          # embedding, head, final norm
    assert c["bytes"] == 4 * (3 * cfg.param_count() - root) and c["alone_ms"] > 0, c
    assert "2 reduce-scatters" not in job_line(record) and "5 all-gathers, 3 reduce-scatters" in job_line(record)
    assert_none_left(procs)


@pytest.mark.e2e
def test_fsdp_kept_gathered_in_bf16_gathers_each_block_once_and_carries_bf16():
    """Two of FSDP's knobs in one job (a torchrun job is about 12 CPU-s here), each read on its own figure: blocks kept
    gathered from forward to backward (`reshard` off: one all-gather a block, not two) and FSDP's bf16 mixed
    precision (every collective in bf16)."""
    record, _, procs = run_job(JOB.with_(parallel="fsdp", steps=2, reshard=False, precision="bf16", fsdp_bf16=True))
    assert record.status == "ok", record.error
    c, cfg = record.collectives, config_for("tiny", JOB.ctx)
    assert c["ops"] == {"all_gather": cfg.n_layers + 1, "reduce_scatter": cfg.n_layers + 1}, c
    # every parameter gathered once and reduce-scattered once, two bytes each
    assert c["dtype"] == "bfloat16" and c["bytes"] == 2 * 2 * cfg.param_count(), c
    line = job_line(record)
    assert "blocks kept gathered from forward to backward" in line and "bf16 gathers and reduce-scatters" in line
    assert_none_left(procs)


@pytest.mark.e2e
def test_a_compiled_ddp_job_compiled_whole_runs_and_says_so():
    record, _, procs = run_job(JOB.with_(steps=2, compile=True, optimize_ddp="no_optimization"))
    assert record.status == "ok", record.error
    assert len(record.ranks) == 2 and len(record.steps) == 2 and record.collectives["alone_ms"] > 0
    assert "compiled whole, no DDPOptimizer" in job_line(record) and "no-ddp-optimizer" in record.name
    assert_none_left(procs)


def assert_trains_as(record, procs, reference: RunSpec, rel: float) -> None:
    """The job's losses are the reference job's, to `rel`, and neither job left a process behind."""
    other, _, other_procs = run_job(reference)
    assert other.status == "ok", other.error
    losses = [s.loss for s in record.warmup_steps + record.steps]
    assert losses == pytest.approx([s.loss for s in other.warmup_steps + other.steps], rel=rel)
    assert_none_left(procs)
    assert_none_left(other_procs)


@pytest.mark.e2e
def test_a_compiled_ddp_job_under_compiled_autograd_trains_as_ddps_graph_splitting_does():
    """optimize_ddp python_reducer: DDP's Python reducer, each step's forward and backward under compiled autograd
    (core.measure.converters). The same losses as the DDPOptimizer job to fp32's rounding, its steps without the
    all-reduce measured (no_sync reaches the Python reducer), its collectives alone measured, and the record says
    its collectives were not timed inside the step (they run in the compiled backward, where no bucket hook is)."""
    spec = JOB.with_(steps=2, compile=True)
    record, seen, procs = run_job(spec.with_(optimize_ddp="python_reducer"))
    assert record.status == "ok", record.error
    assert any(e.type == "progress" and "compiled autograd" in e.detail for e in seen)
    assert len(record.ranks) == 2 and len(record.steps) == 2 and record.collectives["alone_ms"] > 0
    # the collectives alone are the all-reduces inductor fused: as many as it counted compiling the backward
    assert record.collectives["buckets"] == record.collectives["inductor_buckets"] >= 2, record.collectives
    assert record.comm_free_ms and record.comm_steps is None
    # the backward without the all-reduce is a graph of its own, compiled in a warm-up step that is not counted
    warm = [e.detail for e in seen if e.type == "progress" and e.stage == "comm_free" and "warm-up" in e.detail]
    assert len(warm) == 1 and max(record.comm_free_ms) < 10 * min(record.comm_free_ms), (warm, record.comm_free_ms)
    line = job_line(record)
    assert "compiled autograd: the all-reduces in the backward's graph, not timed apart" in line, line
    assert "compiled-autograd" in record.name
    assert_trains_as(record, procs, spec, rel=1e-5)


@pytest.mark.e2e
def test_a_zero1_job_trains_as_ddp_does_and_its_collectives_alone_hold_its_broadcasts():
    """--zero: ZeroRedundancyOptimizer on each rank's shard; the same AdamW updates, so the same losses as the plain
    DDP job, to fp32's rounding; its collectives alone are DDP's all-reduces and one broadcast a rank."""
    spec = JOB.with_(steps=2)
    record, _, procs = run_job(spec.with_(zero=True))
    assert record.status == "ok", record.error
    assert record.collectives["ops"] == {"all_reduce": record.collectives["buckets"], "broadcast": 2}
    assert "ZeRO-1: AdamW's state sharded, each shard broadcast after the step" in job_line(record)
    assert_trains_as(record, procs, spec, rel=1e-6)


@pytest.mark.e2e
def test_a_zero2_job_trains_as_ddp_does_and_its_collectives_alone_are_its_scatters_and_gathers():
    """--zero2 (core.measure.sharded_step): each bucket reduce-scattered in DDP's comm hook, AdamW on each rank's
    slice, the parameters all-gathered; the same AdamW updates as the plain DDP job, so its losses, through three
    sharded steps; three ranks, so buckets end past their last whole slice (those elements stepped by every rank)."""
    spec = JOB.with_(steps=3, nproc=3, grad_as_bucket_view=True, bucket_mb=1.0)
    record, seen, procs = run_job(spec.with_(zero2=True))
    assert record.status == "ok", record.error
    ops, buckets = record.collectives["ops"], record.collectives["buckets"]
    assert ops.get("reduce_scatter") == ops.get("all_gather") == buckets >= 2, record.collectives
    assert "ZeRO-2" in record.collectives["source"] and ops.get("all_reduce") == 1  # the tails, together
    assert "ZeRO-2: gradients reduce-scattered, AdamW on each rank's slice" in job_line(record)
    # the timed steps count the gathers after the step beside the reduce-scatters in the backward
    assert record.comm_steps and all(c and c > 0 for c in record.comm_steps["comm_ms"]), record.comm_steps
    assert record.comm_free_ms and len(record.comm_free_ms) == 3
    assert_trains_as(record, procs, spec, rel=1e-6)


@pytest.mark.e2e
@pytest.mark.parametrize("fault, status, kind, start", [("1:raise:2", "error", "crash", "warm"),
                                                         ("1:oom:2", "oom", "oom", "cold: PERFCONSOLE_WARM=off")])
def test_a_failing_rank_is_named_and_nothing_is_left(fault, status, kind, start):
    """Forked ranks (core.launch.warm_rank passes the failed rank's exit on to torchrun, and torchrun's stop to the
    other), and cold ones, as every rank started before."""
    off = {warm.OFF_VAR: "off"} if start != "warm" else {}
    record, seen, procs = run_job(JOB, env={"PERFCONSOLE_RANK_FAULT": fault, **off})
    assert record.environment["start"] == start
    assert record.status == status
    assert record.error.kind == kind and record.error.message.startswith("rank 1: "), record.error
    assert [e.type for e in seen].count("finished") == 1
    assert [s.index for s in record.warmup_steps] == [0] and [s.index for s in record.steps] == [1]
    assert_none_left(procs)


@pytest.mark.e2e
def test_cancel_keeps_the_measured_steps_and_ends_every_rank():
    def cancel_after_first(launch, record, event):
        if isinstance(event, ev.Step) and not event.warmup:
            threading.Thread(target=launch.cancel, daemon=True).start()

    slow = {"PERFCONSOLE_FAULT": "slow:300"}
    record, seen, procs = run_job(JOB.with_(steps=50), env=slow, on_event=cancel_after_first)
    assert record.status == "cancelled"
    assert 1 <= len(record.steps) < 50 and record.summary is not None
    assert_none_left(procs)


def test_cli_scaling_gives_weak_scaling_efficiency(tmp_path):
    out = tmp_path / "job.json"
    cmd = [sys.executable, "-m", "perfconsole.core.cli.main", "run", "--size", "tiny", "--ctx", "32", "--batch", "2",
           "--device", "cpu", "--mode", "train", "--warmup", "1", "--steps", "2", "--nproc", "2", "--scaling",
           "--save", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())["data"]
    assert data["parallel"] == "ddp" and data["baseline"]["status"] == "ok"
    sm = data["summary"]
    assert sm["single_process_ms"] == data["baseline"]["summary"]["total_ms"]["median"]
    assert sm["scaling_efficiency"] == pytest.approx(sm["single_process_ms"] / sm["total_ms"]["median"])
    # Ranks are processes: the job's spread between them, and the efficiency over that interval.
    ranks = sorted(r["summary"]["total_ms"]["median"] for r in data["ranks"])
    assert sm["between_processes"]["total_ms"]["n"] == 2
    assert sm["between_processes"]["total_ms"]["median"] == pytest.approx(sum(ranks) / 2)
    spread = sm["between_processes"]["total_ms"]
    # two ranks are too few for an interval of their median, so the efficiency has none either
    assert spread["ci95_low"] is None and sm["scaling_efficiency_ci95"] is None
    assert "comm" in done.stdout


@pytest.mark.e2e
def test_torch_profile_of_a_job_gives_each_rank_its_capture_and_overlap(tmp_path):
    launch = Launch(JOB.with_(profile="torch", steps=2), out_dir=tmp_path)
    record = RunRecord(launch.spec)
    for event in launch.events():
        record.apply(event)
    assert record.status == "ok", record.error
    assert (tmp_path / "rank-0" / "torch_trace.json").is_file() and (tmp_path / "rank-1" / "torch_trace.json").is_file()
    assert [o["rank"] for o in record.overlap] == [0, 1]
    assert all(o["comm_kernels"] == 0 for o in record.overlap)  # a CPU trace has no GPU kernels
    # the pass's seconds and the host under the quiet steps come from rank 0, who speaks for the job
    assert list(record.profile.seconds) == ["steps", "trace", "tables"]
    assert len(record.host) == 1 and record.host[0]["pid"] in {p["pid"] for p in record.provenance}


def test_cli_baseline_from_a_saved_one_process_run(tmp_path):
    tiny = ["--size", "tiny", "--ctx", "32", "--batch", "2", "--device", "cpu", "--mode", "train", "--warmup", "1",
            "--steps", "2"]
    cli = [sys.executable, "-m", "perfconsole.core.cli.main", "run"]
    one, job = tmp_path / "one.json", tmp_path / "job.json"
    assert subprocess.run([*cli, *tiny, "--save", str(one)], capture_output=True, timeout=120).returncode == 0
    # the same run as `--step-sync` would have saved it: its steps timed another way
    synced = tmp_path / "synced.json"
    doc = json.loads(one.read_text())
    doc["data"]["spec"]["step_sync"] = True
    synced.write_text(json.dumps(doc))
    unlike = subprocess.run([*cli, *tiny, "--nproc", "2", "--baseline", str(synced)], capture_output=True,
                            text=True, timeout=120)
    assert unlike.returncode == 2 and "time both the same way" in unlike.stderr
    wrong = subprocess.run([*cli, *tiny[:2], "--ctx", "64", *tiny[4:], "--nproc", "2", "--baseline", str(one)],
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and wrong.stderr.strip().count("\n") == 0
    assert "baseline: is another program: ctx 32, the job's 64" in wrong.stderr
    done = subprocess.run([*cli, *tiny, "--nproc", "2", "--baseline", str(one), "--save", str(job)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(job.read_text())["data"]
    base = json.loads(one.read_text())["data"]["summary"]["total_ms"]["median"]
    assert data["summary"]["single_process_ms"] == base
    assert data["summary"]["scaling_efficiency"] == pytest.approx(base / data["summary"]["total_ms"]["median"])


def test_quiet_ddp_has_no_hook_until_the_collectives_are_timed(monkeypatch):
    """The quiet steps run DDP as a user's program does; the timer's hook arrives only for its own steps,
    after DDP has already run (DDP accepts a first hook late)."""
    import torch
    import torch.distributed as dist

    from perfconsole.core.measure import data_parallel

    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "0")
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        rank = data_parallel.Rank(0, 1, 0, torch.device("cpu"), None)
        spec = JOB.with_(nproc=1)
        ddp, timer = data_parallel.wrap_model(spec.section("parallel"), torch.nn.Linear(4, 4), rank)
        assert not timer.registered and not ddp._get_ddp_logging_data().get("comm_hook")
        ddp(torch.ones(2, 4)).sum().backward()
        data_parallel.time_comm(ddp, timer)
        assert timer.on and "CommTimer" in ddp._get_ddp_logging_data().get("comm_hook")
        timer.begin()
        ddp(torch.ones(2, 4)).sum().backward()
        assert timer.step_ms() > 0
        bf16, t16 = data_parallel.wrap_model(spec.with_(comm_hook="bf16").section("parallel"), torch.nn.Linear(4, 4),
                                             rank)
        assert t16.registered and not t16.on  # the user's hook, wrapped from the start, timing nothing yet
    finally:
        dist.destroy_process_group()

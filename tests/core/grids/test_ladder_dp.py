"""The data-parallel ladder (`ladder --nproc N`): its rungs, the one-process baseline each program runs once,
the memory estimate that keeps a rung that cannot fit from starting, the scaling bars, and a real two-process
ladder on the CPU (gloo)."""
from __future__ import annotations

import json
import subprocess

import pytest

from perfconsole.core import store
from perfconsole.core.grids.dp_ladder import MEMORY_EDGE, Refused, memory_estimate, shared_baseline, state_bytes
from perfconsole.core.grids.ladder import DP_RUNG_NAMES, LadderRecord, LadderRunner, LadderSpec
from perfconsole.core.reports import ladder as report
from perfconsole.core.reports.scaling_bars import bars, lines
from perfconsole.core.settings import RunSpec, SpecError
from tests.helpers import FIXTURES, PC

BASE = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", mode="train", warmup=1, steps=2, precision="bf16",
               nproc=2, parallel="ddp")
DDP_27B = FIXTURES / "parallel" / "ddp2_2.7B_h200.json"
FSDP_27B = FIXTURES / "parallel" / "fsdp2_bf16_noreshard_2.7B_h200.json"


def test_each_data_parallel_rung_is_the_last_plus_its_change():
    spec = LadderSpec(BASE).validate()
    assert spec.rungs == tuple(n for n in DP_RUNG_NAMES if n not in ("compiled-autograd", "zero", "zero2"))  # opt-in: named
    cells = dict(zip(spec.rungs_in_order(), spec.cells()))
    assert all(c.scaling and c.nproc == 2 for c in cells.values())
    assert cells["ddp"].parallel == "ddp" and cells["ddp"].bucket_mb is None and cells["ddp"].attention == "sdpa"
    assert cells["bucket-view"].bucket_mb == 100.0 and cells["bucket-view"].grad_as_bucket_view
    assert cells["bf16-hook"].comm_hook == "bf16" and cells["bf16-hook"].weights == "fp32"
    assert cells["bf16-weights"].weights == "bf16" and cells["bf16-weights"].comm_hook == "none"
    assert cells["compile"].compile and cells["compile"].weights == "bf16"
    # NCCL's priority is one rung's change; on the CPU (this base) gloo rules it out, so nothing above carries it
    assert cells["nccl-priority"].nccl_priority and not cells["fsdp"].nccl_priority
    on_gpu = dict(zip(spec.rungs_in_order(), LadderSpec(BASE.with_(device="cuda")).cells()))
    assert on_gpu["nccl-priority"].nccl_priority and on_gpu["fsdp"].nccl_priority and on_gpu["compile"].compile
    # FSDP sets DDP's own settings and the weights back and starts eager; its rungs then carry up
    fsdp = cells["fsdp"]
    assert (fsdp.parallel, fsdp.bucket_mb, fsdp.grad_as_bucket_view, fsdp.comm_hook, fsdp.compile, fsdp.weights) == (
        "fsdp", None, False, "none", False, "fp32")
    assert not cells["no-reshard"].reshard and cells["fsdp-bf16"].fsdp_bf16 and not cells["fsdp-bf16"].reshard


def test_compiled_autograd_is_a_rung_when_named_on_top_of_compile_and_fsdp_sets_it_back():
    spec = LadderSpec(BASE, DP_RUNG_NAMES).validate()
    cells = dict(zip(spec.rungs_in_order(), spec.cells()))
    ca = cells["compiled-autograd"]
    assert (ca.compile, ca.optimize_ddp, ca.comm_hook, ca.weights) == (True, "python_reducer", "none", "bf16")
    assert cells["compile"].optimize_ddp == "ddp_optimizer" and cells["nccl-priority"].optimize_ddp == "python_reducer"
    assert cells["fsdp"].optimize_ddp == "ddp_optimizer"
    assert cells["zero"].zero and cells["zero"].optimize_ddp == "python_reducer" and not cells["fsdp"].zero
    # not named, an opt-in rung passes nothing up: the default ladder's rungs are the programs they always were
    default = LadderSpec(BASE.with_(device="cuda")).validate()
    above = dict(zip(default.rungs_in_order(), default.cells()))
    assert all(c.optimize_ddp == "ddp_optimizer" and not c.zero for c in above.values())
    assert above["nccl-priority"].nccl_priority and above["nccl-priority"].compile
    # named without the compile rung, compile's change still passes up: the rung runs compiled
    alone = LadderSpec(BASE, ("ddp", "compiled-autograd")).validate()
    assert alone.cells()[-1].compile and alone.cells()[-1].optimize_ddp == "python_reducer"


def test_a_rung_the_precision_rules_out_ends_unsupported_before_it_starts():
    spec = LadderSpec(BASE.with_(precision="fp32")).validate()
    record = LadderRecord.new(spec)
    ruled = {name: r for name, r in zip(spec.rungs_in_order(), record.runs) if r.status == "unsupported"}
    assert sorted(ruled) == ["bf16-weights", "fsdp-bf16", "nccl-priority"]
    assert all("precision bf16" in ruled[n].error.message for n in ("bf16-weights", "fsdp-bf16"))
    assert "device cuda" in ruled["nccl-priority"].error.message  # the base runs on the CPU: gloo has no NCCL streams
    assert sum(r.status == "pending" for r in record.runs) == len(record.runs) - 3
    cells = dict(zip(spec.rungs_in_order(), spec.cells()))
    assert cells["compile"].weights == "fp32"  # a change the precision rules out is not carried up
    assert "bf16-weights" in dict(spec.not_carried())
    with pytest.raises(SpecError) as e:
        LadderSpec(BASE, ("eager",)).validate()  # a one-process rung named for a job
    assert e.value.field == "rungs" and "data-parallel" in str(e.value)


def _loaded(path, name):
    r = store.load(path)
    r.name = name
    return r


def test_the_one_process_program_runs_once_for_the_rungs_that_share_it():
    ddp = _loaded(DDP_27B, "ddp")
    later = ddp.spec.with_(grad_as_bucket_view=True, bucket_mb=100.0)
    event = shared_baseline([("ddp", ddp)], later)
    assert "rung ddp" in event.source and event.status == "ok"
    assert event.summary["total_ms"]["median"] == ddp.baseline["summary"]["total_ms"]["median"]
    assert shared_baseline([("ddp", ddp)], later.with_(parallel="fsdp", bucket_mb=None, grad_as_bucket_view=False))
    assert shared_baseline([("ddp", ddp)], later.with_(compile=True)) is None  # another program: its own run


def test_the_memory_estimate_from_a_measured_rung_is_near_what_the_next_one_measured():
    ddp, fsdp = _loaded(DDP_27B, "ddp"), _loaded(FSDP_27B, "fsdp-bf16")
    est = memory_estimate([("ddp", ddp)], fsdp.spec)
    assert est["from"] == "ddp" and est["fits"]
    measured = fsdp.summary.peak_allocated_mib
    assert est["estimate_mib"] == pytest.approx(measured, rel=0.05)  # 36.4 GiB estimated, 35.5 GiB measured
    params = ddp.model["params"]
    assert state_bytes(ddp.spec, params) == 20 * params  # fp32 parameters, gradients, buckets, two moments
    # bucket views saved nothing at the peak on 2x H200 (68.2 GiB both); the bf16 hook's copies add 2 bytes each
    assert state_bytes(ddp.spec.with_(grad_as_bucket_view=True), params) == 20 * params
    assert state_bytes(ddp.spec.with_(comm_hook="bf16"), params) == 22 * params
    # from a rung of the same wrapper where one ran: FSDP from FSDP, though DDP ran after it
    fsdp_plain = fsdp.spec.with_(fsdp_bf16=False, reshard=True)
    assert memory_estimate([("fsdp-bf16", fsdp), ("ddp", ddp)], fsdp_plain)["from"] == "fsdp-bf16"


def test_a_rung_that_cannot_fit_the_card_is_refused_as_oom_without_a_process():
    fsdp = _loaded(FSDP_27B, "fsdp-bf16")
    fsdp.environment["gpu_memory_mib"] = 46068.0  # a 48 GB card: FSDP's 35.5 GiB fit, DDP's whole state does not
    ddp_spec = fsdp.spec.with_(parallel="ddp", reshard=True, fsdp_bf16=False)
    est = memory_estimate([("fsdp-bf16", fsdp)], ddp_spec)
    assert not est["fits"] and est["estimate_mib"] > MEMORY_EDGE * 46068.0
    # The runner asks before it starts a rung: DDP measured at 68.2 GiB on a card of 68.4 GiB leaves the next rung,
    # with the same state, over the edge.
    ddp = _loaded(DDP_27B, "ddp")
    ddp.environment["gpu_memory_mib"] = 70000.0
    record = LadderRecord.new(LadderSpec(ddp.spec.with_(scaling=False), ("ddp", "bucket-100")))
    record.runs[0] = ddp
    runner = LadderRunner(record)
    assert runner.start_ahead == 1  # a torchrun job cannot be started ahead, held
    launch = runner.new_launch(1, record.runs[1])
    assert isinstance(launch, Refused)
    launch.start()
    for event in launch.events():
        record.runs[1].apply(event)
    assert record.runs[1].status == "oom" and "rung ddp peaked at 68.2 GiB" in record.runs[1].error.message


def test_scaling_bars_split_ddp_and_say_fsdp_is_not_split():
    ddp, fsdp = _loaded(DDP_27B, "ddp"), _loaded(FSDP_27B, "fsdp-bf16")
    spec = LadderSpec(ddp.spec.with_(scaling=False), ("ddp", "fsdp-bf16"))
    record = LadderRecord(spec, [ddp, fsdp])
    rs = report.rows(record)
    assert rs[0].scaling_efficiency == pytest.approx(145.44 / 184.60, rel=0.01)
    assert rs[0].exposed_comm_ms == pytest.approx(37.53, abs=0.01)
    drawn = lines(bars(rs, 2), full="#", comm="=", width=40)
    one, job = drawn[1], drawn[2]
    assert one.count("#") == round(145.44 * 40 / 184.60) and "145.4 ms" in one
    assert job.count("=") == round(37.53 * 40 / 184.60) and "exposed 37.5 ms" in job and "78.8%" in job
    assert "not separated" in drawn[4]
    md = report.markdown(record)
    assert "| 1 ddp | 145.44 | 184.60 | 78.8 |" in md and "```" in md
    assert json.loads(report.json_text(record))["rungs"][0]["exposed_comm_ms"] == pytest.approx(37.53, abs=0.01)


@pytest.mark.e2e
def test_a_two_process_ladder_runs_on_the_cpu_with_one_baseline_run(tmp_path):
    save = tmp_path / "ladder.json"
    done = subprocess.run([*PC, "ladder", "--size", "tiny", "--device", "cpu", "--nproc", "2", "--ctx", "32",
                           "--batch", "2", "--warmup", "1", "--steps", "2", "--precision", "fp32",
                           "--rungs", "ddp,bucket-view,fsdp", "--no-profile", "--save", str(save)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    record = store.load(save)
    assert [r.status for r in record.runs] == ["ok", "ok", "ok"]
    assert all(r.summary.scaling_efficiency for r in record.runs)
    first = record.runs[0].baseline["summary"]["total_ms"]["median"]
    assert all(r.baseline["summary"]["total_ms"]["median"] == first for r in record.runs)
    assert "source" not in record.runs[0].baseline  # measured just before its job
    assert all("the one-process run of rung ddp" in r.baseline["source"] for r in record.runs[1:])
    assert "2 GPUs" in done.stdout and "weak scaling" in done.stdout

"""On a GPU: perfconsole's median step time agrees with an independent timing of the same step."""
import json
import subprocess
import sys

import pytest

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from helpers import ROOT



def perfconsole_run(spec: RunSpec) -> RunRecord:
    record = RunRecord(spec)
    for event in Launch(spec).events():
        record.apply(event)
    assert record.status == "ok", record.error
    return record


# medium in fp32 is GPU-bound at ctx 512 (50 ms forward, 145 ms train step on an H200, std < 0.4 ms).
# bf16 under eager autocast is not, below 2.7B: its steps are bound by dispatch on the host (nsys
# shows ~9 ms of kernels in a ~50 ms small step), so two processes differ by host jitter, not by
# measurement (docs/results/engine_sizes_ctx512_h200.md). 2.7B bf16 is checked in engine_targets.
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["fwd", "train"])
def test_median_step_matches_independent_cuda_event_timing(mode):
    spec = RunSpec(size="medium", ctx=512, batch=4, precision="fp32", mode=mode, warmup=5, steps=20, device="cuda")
    ours = perfconsole_run(spec).summary.total_ms.median
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "independent_timing.py"), "--size", "medium",
                          "--ctx", "512", "--precision", "fp32", "--mode", mode, "--warmup", "5", "--steps", "20"],
                         capture_output=True, text=True, check=True, timeout=600)
    # perfconsole keeps a step in flight, as the independent script's back-to-back loop does.
    theirs = json.loads(out.stdout.strip().splitlines()[-1])["back_to_back_mean_ms"]
    assert ours == pytest.approx(theirs, rel=0.03), f"perfconsole {ours:.3f} ms vs independent {theirs:.3f} ms"


@pytest.mark.gpu
def test_gpu_run_reports_environment_memory_and_mfu():
    spec = RunSpec(size="small", ctx=256, batch=4, precision="bf16", mode="train", warmup=2, steps=3, device="cuda")
    r = perfconsole_run(spec)
    assert r.environment["gpu_name"] and r.environment["cuda"]
    assert r.summary.peak_allocated_mib > 100 and r.summary.peak_reserved_mib >= r.summary.peak_allocated_mib
    if r.summary.peak_tflops:
        assert 0 < r.summary.mfu < 1


@pytest.mark.gpu
def test_real_oom_is_an_oom_cell():
    spec = RunSpec(size="2.7B", ctx=16384, batch=64, precision="fp32", mode="train", warmup=0, steps=1, device="cuda")
    record = RunRecord(spec)
    for event in Launch(spec).events():
        record.apply(event)
    assert record.status == "oom" and record.error.kind == "oom"


# 2.7B eager bf16 at ctx 512, batch 4: the forward's kernels (49 ms a step under nsys) take about as long as
# the host needs to issue them (host_forward_ms 45-49 ms synchronised, 71 ms in flight beside a busy CPU on
# 2x H200), so the forward is paced by the host, wholly or in part (docs/results/gpu_tests_h200.md). A step
# in flight cannot make such a phase shorter than its issue; what it guarantees is that no phase waits for
# more than its own work or its own issue, and that the phases the host does not pace are the same either way.
@pytest.mark.gpu
def test_a_step_in_flight_waits_only_for_its_own_work_or_its_own_issue():
    spec = RunSpec(size="2.7B", ctx=512, batch=4, precision="bf16", mode="train", warmup=3, steps=8, device="cuda")
    flight = perfconsole_run(spec).summary
    synced = perfconsole_run(spec.with_(step_sync=True)).summary
    assert flight.host_forward_ms is not None and synced.host_forward_ms is not None
    # The synchronised forward is its kernels plus the GPU's waits for the host while it was issued. In flight
    # it lasts no longer than that, or than its own issue, plus what the host took longer to issue it in flight
    # (the GPU waits only for the issue). One H200 suite run: 58.17 ms in flight, issued in 52.07 ms, against
    # 55.30 ms synchronised, issued in 45.56 ms. Waiting for the step before would add that step's backward.
    slower_issue = max(0.0, flight.host_forward_ms - synced.host_forward_ms)
    bound = max(synced.forward_ms.median + slower_issue, flight.host_forward_ms) * 1.05
    assert flight.forward_ms.median <= bound, (
        flight.forward_ms, flight.host_forward_ms, synced.forward_ms, synced.host_forward_ms)
    # The backward and the optimizer never waited for the host: they agree either way.
    assert flight.backward_ms.median == pytest.approx(synced.backward_ms.median, rel=0.05)
    assert flight.optimizer_ms.median == pytest.approx(synced.optimizer_ms.median, rel=0.05)

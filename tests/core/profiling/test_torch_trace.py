"""`perfconsole import torch_trace.json`: a trace perfconsole wrote, read back into the same tables."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.profiling.attribution import attribute
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.torch_trace import parse_torch_trace
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    spec = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=3, mode="train", profile="torch")
    record = RunRecord(spec)
    for event in Launch(spec, out_dir=out).events():
        record.apply(event)
    assert record.status == "ok"
    trace = next(Path(f) for f in record.profile.files if f.endswith("torch_trace.json"))
    return record, trace


@pytest.mark.e2e
def test_the_trace_gives_back_the_capture_s_ranges_and_ops(profiled):
    record, trace = profiled
    tables, warnings = load_profile(trace)
    assert warnings == []
    live = record.profile.tables
    ranges = {r["range"]: (r["instances"], r["total_time_ns"]) for r in tables["nvtx_sum"]}
    live_ranges = {r["range"]: (r["instances"], r["total_time_ns"]) for r in live["nvtx_sum"]}
    assert {k: v for k, v in ranges.items() if not k.startswith("Optimizer.")} == live_ranges
    ops = {r["name"]: r["total_time_ns"] for r in tables["cuda_gpu_kern_sum"]}
    live_ops = {r["name"]: r["total_time_ns"] for r in live["cuda_gpu_kern_sum"]}
    # torch's own Optimizer.* record_functions are ranges in the trace, ops in the live capture.
    assert set(live_ops) - set(ops) <= {"Optimizer.step#AdamW.step", "Optimizer.zero_grad#AdamW.zero_grad"}
    for name, ns in ops.items():
        assert ns == pytest.approx(live_ops[name], rel=0.01, abs=2000), name
    a, b = attribute(tables, 3), attribute(live, 3)
    assert [p.phase for p in a.phases] == [p.phase for p in b.phases] == ["forward", "backward", "optimizer"]
    (fa, ba, oa), (fb, bb, ob) = a.phases, b.phases
    assert fa.kernel_ms == pytest.approx(fb.kernel_ms, rel=0.01)
    assert ba.kernel_ms == pytest.approx(bb.kernel_ms, rel=0.01)
    # The optimizer phase differs by exactly the Optimizer.step record_function's own time.
    step_op = sum(r["total_time_ns"] for r in live["nvtx_kern_sum"]
                  if r["range"] == "optimizer_step" and r["name"].startswith("Optimizer.")) / 1e6
    assert oa.kernel_ms == pytest.approx(ob.kernel_ms - step_op, rel=0.01)


def test_the_cli_imports_the_trace(profiled):
    _, trace = profiled
    out = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "import", str(trace), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "aten::" in out.stdout and "forward" in out.stdout


# A CUDA trace's layout (Kineto): a kernel on the GPU's stream, tied by args.correlation to the runtime
# call that launched it on a host thread. Hand-written to these facts; the CPU tests above read real
# traces, and a GPU run's trace is read by the same code.
def _span(cat, name, ts, dur, tid, pid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_a_gpu_kernel_belongs_to_the_ranges_of_the_thread_that_launched_it():
    events = [
        _span("user_annotation", "forward", 0.0, 100.0, tid=10),
        _span("cuda_runtime", "cudaLaunchKernel", 10.0, 5.0, tid=10, correlation=1),
        _span("user_annotation", "backward", 100.0, 200.0, tid=20),        # autograd's thread
        _span("cuda_runtime", "cudaLaunchKernel", 120.0, 5.0, tid=20, correlation=2),
        _span("cuda_runtime", "cudaLaunchKernel", 400.0, 5.0, tid=10, correlation=3),  # in no range
        _span("kernel", "gemm_fwd", 20.0, 30.0, tid=7, pid=0, correlation=1),
        _span("kernel", "gemm_bwd", 130.0, 60.0, tid=7, pid=0, correlation=2),
        _span("kernel", "fill", 410.0, 10.0, tid=7, pid=0, correlation=3),
    ]
    tables, warnings = parse_torch_trace(json.dumps({"traceEvents": events}), "t.json")
    assert warnings == []
    kern = {r["name"]: r["total_time_ns"] for r in tables["cuda_gpu_kern_sum"]}
    assert kern == {"gemm_fwd": 30_000, "gemm_bwd": 60_000, "fill": 10_000}
    inside = {(r["range"], r["name"]): r["total_time_ns"] for r in tables["nvtx_kern_sum"]}
    assert inside == {("forward", "gemm_fwd"): 30_000, ("backward", "gemm_bwd"): 60_000}
    a = attribute(tables, 1)
    assert a.unattributed_share == pytest.approx(10 / 100)


@pytest.mark.parametrize("text, word", [("[" * 100_000, "RecursionError"), ('{"traceEvents": 3}', "no traceEvents"),
                                        ('{"traceEvents": []}', "no kernels")])
def test_bad_traces_are_warnings_not_crashes(text, word):
    tables, warnings = parse_torch_trace(text, "bad.json")
    assert tables == {} and word in warnings[0] and warnings[0].startswith("bad.json")

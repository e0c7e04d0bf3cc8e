"""The torch profiler's kernel table counts each kernel once. CUDA device events cannot exist on a CPU
machine, so these are events shaped like torch's FunctionEvent, and a Chrome trace an H200 wrote; the real
capture is checked on the GPU machine (tests/core/measure/test_peaks_fast_paths.py::
test_gpu_profile_counts_each_kernel_once)."""
from __future__ import annotations

import gzip
from pathlib import Path
from types import SimpleNamespace

import torch

from perfconsole.core.profiling import torch_profiler
from perfconsole.core.profiling.torch_profiler import TorchCapture, _leaves
from perfconsole.core.reports.profile import over_count, overhead_lines

CPU, CUDA = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA


def _event(name, device_type, start, end, corr_id=0, linked=0):
    return SimpleNamespace(name=name, device_type=device_type, is_async=False, id=corr_id, linked_correlation_id=linked,
                           time_range=SimpleNamespace(start=start, end=end), device_index=0, cpu_parent=None)


def test_a_kernel_reported_twice_is_counted_once_and_owned_by_its_op():
    op = _event("aten::_fused_adamw_", CPU, 0, 100, corr_id=7)
    launch = _event("cudaLaunchKernel", CPU, 10, 12, linked=7)
    kernels = [_event("multi_tensor_apply_kernel", CUDA, 200, 300, linked=7),
               _event("multi_tensor_apply_kernel", CUDA, 200, 300, linked=7),   # the same kernel again
               _event("multi_tensor_apply_kernel", CUDA, 300, 400, linked=7)]   # the next launch
    leaves = list(_leaves([op, launch, *kernels], on_gpu=True))
    assert [(name, ns) for name, ns, _ in leaves] == [("multi_tensor_apply_kernel", 100_000)] * 2
    assert all(owner is op for _, _, owner in leaves)


def test_a_table_that_sums_past_its_step_says_so():
    fine = {"profiler": "torch", "quiet_ms": 100.0, "profiled_ms": 101.0, "ratio": 1.01, "profiled_steps": 8,
            "quiet_steps": 8, "kernel_ms_per_step": 98.0}
    assert over_count(fine) is None and "over-counts" not in " ".join(overhead_lines(fine))
    twice = {**fine, "kernel_ms_per_step": 345.4}
    assert over_count(twice) == (345.4, 101.0)
    assert "**The kernel table over-counts:** its kernels sum to 345.400 ms per profiled step, more than the " \
           "101.000 ms step" in " ".join(overhead_lines(twice))


# A real Chrome trace from an H200 (perfconsole ladder --model hf:llama --size 1B --ctx 2048 --batch 4
# --precision bf16 --warmup 2 --steps 3 --rungs bf16-weights,liger --out-dir ..., its bf16-weights rung: CUDA
# graphs, fused AdamW, bf16 weights; docs/results/models_llama1B_ladder_overcount_h200.json). Built from the
# profiler's FunctionEvents, its table had 1,500 multi-tensor kernels and 203.7 ms of kernels a step in a
# 155.4 ms step; the trace holds each kernel once.
TRACE = Path(__file__).resolve().parents[2] / "fixtures" / "torch_traces" / "h200_llama1B_bf16w_cudagraphs_3steps.json.gz"


def test_on_cuda_the_tables_come_from_the_trace_with_each_kernel_once(tmp_path, monkeypatch):
    trace = tmp_path / "torch_trace.json"
    trace.write_bytes(gzip.decompress(TRACE.read_bytes()))
    capture = TorchCapture(tmp_path, "cuda")
    capture.files.append(str(trace))
    capture._prof = SimpleNamespace(events=lambda: [])     # the capture ran; its events are not read on CUDA
    monkeypatch.setattr(torch_profiler, "_RANGE_NAMES", {"forward", "backward", "optimizer_step"})
    tables = capture.tables()
    kernels = tables["cuda_gpu_kern_sum"]
    total_ms = sum(k["total_time_ns"] for k in kernels) / 1e6
    assert sum(k["instances"] for k in kernels) == 2475
    assert sum(k["instances"] for k in kernels if "multi_tensor_apply" in k["name"]) == 342
    assert 3 * 150 < total_ms < 3 * 155.4                 # three steps of about 153 ms, not 3 x 203.7
    # Only the run's own ranges, and every kernel in one of its phases.
    assert {r["range"] for r in tables["nvtx_sum"]} == {"forward", "backward", "optimizer_step"}
    in_phases = sum(r["total_time_ns"] for r in tables["nvtx_kern_sum"]) / 1e6
    assert abs(in_phases - total_ms) < 0.01
    assert round(sum(r["time_pct"] for r in tables["nvtx_sum"])) == 100


def test_on_the_cpu_the_tables_come_from_the_profiler_s_events(tmp_path):
    trace = tmp_path / "torch_trace.json"
    trace.write_bytes(gzip.decompress(TRACE.read_bytes()))
    capture = TorchCapture(tmp_path, "cpu")
    capture.files.append(str(trace))
    assert capture._from_trace() is None

"""The torch profiler's kernel table counts each kernel once. CUDA device events cannot exist on a CPU
machine, so these are events shaped like torch's FunctionEvent; the real ones are checked on the GPU
machine (tests/core/measure/test_peaks_fast_paths.py::test_gpu_profile_counts_each_kernel_once)."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from perfconsole.core.profiling.torch_profiler import _leaves
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

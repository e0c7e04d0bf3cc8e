"""Communication/compute overlap from kernel intervals, and the union of collective intervals."""
from __future__ import annotations

import json

import pytest

from perfconsole.core.measure.data_parallel import union_ms
from perfconsole.core.profiling.overlap import intersection_length, length, merge, overlap, trace_overlap

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"


def test_interval_arithmetic():
    assert merge([(5, 7), (0, 2), (1, 3), (7, 8)]) == [(0, 3), (5, 8)]
    assert length([(0, 2), (1, 3), (10, 11)]) == 4
    assert intersection_length([(0, 10)], [(2, 3), (2.5, 4), (9, 12)]) == pytest.approx(3)
    assert intersection_length([(0, 1)], [(1, 2)]) == 0
    assert union_ms([(0, 2), (1, 3), (5, 6)]) == 4
    assert union_ms([(0, 10), (2, 3)]) == 10


def test_overlap_counts_other_kernels_on_the_same_gpu_only():
    kernels = [(NCCL, 0.0, 10.0, 0), (GEMM, 2.0, 6.0, 0), (GEMM, 4.0, 8.0, 0),  # 6 of 10 ms under compute
               (NCCL, 0.0, 4.0, 1), (GEMM, 0.0, 4.0, 0)]                         # GPU 1 has no compute
    o = overlap(kernels)
    assert o.comm_kernels == 2 and o.other_kernels == 3
    assert o.comm_kernel_ms == 14 and o.overlapped_ms == pytest.approx(8)        # 0-8 on GPU 0
    assert o.overlap_share == pytest.approx(8 / 14)


def test_no_communication_kernels_gives_no_share():
    o = overlap([(GEMM, 0.0, 1.0, 0)])
    assert o.overlap_share is None and o.comm_kernels == 0


def test_trace_overlap_reads_kineto_kernel_events(tmp_path):
    # The fields Kineto writes for a kernel: ph X, cat kernel, ts/dur in microseconds, args.device.
    events = [{"ph": "X", "cat": "kernel", "name": NCCL, "ts": 1000.0, "dur": 400.0, "pid": 0, "tid": 20,
               "args": {"device": 0, "stream": 20}},
              {"ph": "X", "cat": "kernel", "name": GEMM, "ts": 1100.0, "dur": 100.0, "pid": 0, "tid": 7,
               "args": {"device": 0, "stream": 7}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 900.0, "dur": 600.0, "pid": 1, "tid": 1}]
    path = tmp_path / "torch_trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    o = trace_overlap(path)
    assert o.comm_kernel_ms == pytest.approx(0.4) and o.overlapped_ms == pytest.approx(0.1)

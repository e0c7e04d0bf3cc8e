"""The analyses over a profile's tables (core.profiling.analyses): category and phase shares, top kernels,
softmax against the attention matmuls, the forward check."""
from __future__ import annotations


import pytest

from perfconsole.core.profiling.analyses import (
    category_shares, forward_check, phase_shares, softmax_vs_matmuls, top_kernels, top_kernels_per_range,
)
from perfconsole.core.profiling.load import load_profile
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "nsys"


def test_category_shares_cover_the_table() -> None:
    tables = load_profile(FIXTURES / "gpa/llama2-70B-GBS512-FSDP256_cuda_gpu_kern_sum.csv")[0]
    shares = category_shares(tables)
    total = sum(r["total_time_ns"] for r in tables["cuda_gpu_kern_sum"])
    assert sum(s.total_ns for s in shares) == total
    assert abs(sum(s.share for s in shares) - 1.0) < 1e-9
    assert shares[0].category == "matmul" and shares[0].to_dict()["category"] == "matmul"
    assert [s.total_ns for s in shares] == sorted((s.total_ns for s in shares), reverse=True)
    assert {s.category for s in shares} >= {"matmul", "communication"}


def _kern_row(rng: str, name: str, ns: int, n: int) -> dict:
    return {"domain": "", "range": rng, "style": "PushPop", "pid": 1, "tid": 1, "nvtx_inst": 10, "kern_inst": n,
            "total_time_ns": ns, "avg_ns": ns // n, "med_ns": ns // n, "min_ns": 1, "max_ns": ns, "stddev_ns": 0,
            "name": name}


def _nvtx_row(rng: str, ns: int, n: int) -> dict:
    return {"time_pct": 0.0, "total_time_ns": ns, "instances": n, "avg_ns": ns // n, "med_ns": ns // n,
            "min_ns": 1, "max_ns": ns, "stddev_ns": 0, "style": "PushPop", "domain": "", "range": rng}


TABLES = {
    "nvtx_kern_sum": [
        _kern_row("forward", "ampere_sgemm_128x64_tn", 8_000_000, 100),
        _kern_row("forward", "void softmax_warp_forward<float>", 1_000_000, 10),
        _kern_row("forward", "void at::native::vectorized_elementwise_kernel<4, MulFunctor>", 1_000_000, 50),
        _kern_row("backward", "ampere_sgemm_128x64_nn", 12_000_000, 200),
        {**_kern_row("backward", "ampere_sgemm_128x64_nn", 3_000_000, 50), "tid": 2},
        _kern_row("optimizer_step", "void multi_tensor_apply_kernel<AdamFunctor>", 2_000_000, 10),
        _kern_row("computing attention scores", "ampere_sgemm_128x64_tn", 600_000, 10),
        _kern_row("computing softmax", "void softmax_warp_forward<float>", 300_000, 10),
        _kern_row("final matmul", "ampere_sgemm_32x128_nn", 400_000, 10),
    ],
    "nvtx_sum": [_nvtx_row("forward", 110_000_000, 10), _nvtx_row("computing attention scores", 2_000_000, 40),
                 _nvtx_row("computing softmax", 3_000_000, 40), _nvtx_row("final matmul", 1_000_000, 40)],
}


def test_phase_shares_from_nvtx_kern_sum() -> None:
    phases = {p.phase: p for p in phase_shares(TABLES)}
    assert list(phases) == ["forward", "backward", "optimizer_step"]
    fwd = {c.category: c.share for c in phases["forward"].categories}
    assert fwd == {"matmul": 0.8, "softmax": 0.1, "elementwise": 0.1}
    assert phases["backward"].total_ns == 15_000_000
    assert phases["optimizer_step"].categories[0].category == "optimizer"


def test_top_kernels_per_range_merges_threads() -> None:
    per = {t.range: t for t in top_kernels_per_range(TABLES, n=2)}
    assert per["backward"].kernels[0].total_ns == 15_000_000 and per["backward"].kernels[0].instances == 250
    assert [k.name for k in per["forward"].kernels] == ["ampere_sgemm_128x64_tn", "void softmax_warp_forward<float>"]
    assert per["forward"].kernels[0].share == 0.8
    overall = top_kernels(load_profile(FIXTURES / "gpa/demo_cuda_gpu_kern_sum.csv")[0], n=3)
    assert overall.range == "" and [k.rank for k in overall.kernels] == [1, 2, 3]
    assert overall.kernels[0].category == "communication"


def test_softmax_against_attention_matmuls() -> None:
    s = softmax_vs_matmuls(TABLES)
    assert s is not None
    assert (s.scores_ns, s.softmax_ns, s.final_matmul_ns, s.instances) == (2_000_000, 3_000_000, 1_000_000, 40)
    assert s.softmax_over_matmuls == 1.0
    assert s.kernel_softmax_over_matmuls == pytest.approx(0.3)
    assert softmax_vs_matmuls({"nvtx_sum": []}) is None


def test_forward_check() -> None:
    c = forward_check(TABLES, timed_forward_ms=10.5)
    assert c is not None
    assert c.profiled_ms == 11.0 and c.steps == 10 and c.kernel_ms == 1.0
    assert c.within(0.10) and not c.within(0.01)
    assert c.to_dict()["within_10pct"] is True
    assert forward_check(TABLES, 10.0, steps=5).profiled_ms == 22.0
    assert forward_check({}, 10.0) is None

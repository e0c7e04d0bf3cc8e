"""The "why" view on real output (tests/fixtures/ncu): kernel names as the torch profiler and ncu spell them joined,
ncu's kernel filter built from the torch profiler's names, and each kernel's limits against measured peaks."""
from __future__ import annotations

import re

import pytest

from perfconsole.core import store
from perfconsole.core.launch.ncu import kernel_regex
from perfconsole.core.profiling.ncu_csv import read_pages
from perfconsole.core.profiling.ncu_kernels import function_name, kernel_key, launch_rows, name_head
from perfconsole.core.profiling.ncu_why import why_frame, why_rows
from perfconsole.core.reports.kernel_why import kernel_why
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "ncu"
# The peaks the worker measured on that H100 before the small run (its snapshot's `peaks`).
H100_PEAKS = {"matmul_tflops": {"bf16": 783.5, "fp16": 751.1, "fp32": 51.7, "tf32": 404.1}, "bandwidth_gbps": 3009.8}


@pytest.fixture(scope="module")
def small():
    return store.load(FIXTURES / "small_train_h100.json")


def test_both_demanglers_spell_one_key(small):
    tables = small.profile.tables
    torch_keys = {kernel_key(r["name"]) for r in tables["cuda_gpu_kern_sum"]}
    assert len(torch_keys) == len(tables["cuda_gpu_kern_sum"])  # no two of the run's kernels share a key
    ncu_names = {r["kernel"] for r in tables["ncu_kernels"]}
    assert len(ncu_names) == 17
    assert {kernel_key(n) for n in ncu_names} <= torch_keys
    # One pair spelled apart by every difference: scopes, casts, bools, `const`, the parameter lists.
    gnu = next(r["name"] for r in tables["cuda_gpu_kern_sum"] if "FusedAdamMathFunctor<float" in r["name"])
    nv = next(n for n in ncu_names if "FusedAdamMathFunctor<float" in n)
    assert "(anonymous namespace)" in gnu and "<unnamed>" in nv and "false" in gnu and ", 0>" in nv
    assert kernel_key(gnu) == kernel_key(nv)
    assert name_head("void f<(int)4>(int, T2)") == "f<(int)4>"
    assert function_name("void at::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, 0>(int, T2)") == \
        "vectorized_layer_norm_kernel"
    assert name_head("void at::native::(anonymous namespace)::g<4>(float*)") == "at::native::(anonymous namespace)::g<4>"


def test_filter_from_torch_names_matches_what_ncu_profiled(small):
    asked = small.profile.tables["ncu_run"][0]["kernels_asked"]
    regex = re.compile(kernel_regex(asked))
    log = (FIXTURES / "small_train_ncu.log").read_text()
    profiled = set(re.findall(r'==PROF== Profiling "([^"]+)"', log))
    assert profiled == {"vectorized_elementwise_kernel", "elementwise_kernel", "unrolled_elementwise_kernel",
                        "nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN", "multi_tensor_apply_kernel"}
    assert {function_name(a) for a in asked} == profiled
    assert all(regex.search(p) for p in profiled)
    # The filter reads demangled names (`--kernel-name-base demangled`): every kernel of the report is found by it.
    demangled = {r["kernel"] for r in small.profile.tables["ncu_kernels"]}
    assert any(n.startswith("void at::") for n in demangled)
    assert all(regex.search(n) for n in demangled)
    for other in ("reduce_kernel", "nvjet_sm90_tst_96x64_64x10_1x2_h_bz_TNN", "softmax_warp_forward",
                  "vectorized_gather_kernel"):
        assert not regex.search(other), other


def test_why_of_the_small_run(small):
    why = kernel_why(small)
    assert why.missing is None and len(why.rows) == 17
    rows = why.rows
    gains = [r["gain_ms"] for r in rows]
    assert gains == sorted(gains, reverse=True) and all(g is not None and g >= 0 for g in gains)
    # Autocast's copies of the fp32 weights to bf16 have the most to gain: latency-bound at 44 % compute.
    top = rows[0]
    assert "direct_copy_kernel_cuda" in top["name"] and top["bound"] == "latency"
    adamw = next(r for r in rows if "FusedAdamMathFunctor<float" in r["name"])  # the most time: memory, 76 %
    assert adamw["ms_per_step"] == max(r["ms_per_step"] for r in rows) and adamw["bound"] == "memory"
    step_ms = small.summary.total_ms.median
    for r in rows:
        assert r["ms_per_step"] is not None and r["gain_ms"] == pytest.approx(
            r["ms_per_step"] * (1 - max(r["compute_pct"], r["memory_pct"]) / 100))
        assert r["step_share"] == pytest.approx(r["ms_per_step"] / step_ms)
        assert r["bound"] == ("latency" if max(r["compute_pct"], r["memory_pct"]) < 60 else
                              "compute" if r["compute_pct"] >= r["memory_pct"] else "memory")
    gemm = why.row("nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN")
    assert gemm["precision"] == "bf16" and gemm["tflops"] > 300 and gemm["side"] == "compute"
    assert gemm["tflops_pct"] == pytest.approx(100 * gemm["tflops"] / small.peaks["matmul_tflops"]["bf16"])
    assert any("tensor pipes" in n for n in why.notes) and any("replays" in n for n in why.notes)


def test_why_of_the_fixture_kernels_against_measured_peaks():
    pages = read_pages((FIXTURES / "details.csv").read_text(), (FIXTURES / "raw.csv").read_text())
    frame = why_frame(launch_rows(pages), None, H100_PEAKS, None, None)
    by = frame.set_index("name")
    gemm = by.loc["nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"]
    assert gemm["tflops"] == pytest.approx(767.8, abs=0.1)
    assert gemm["tflops_pct"] == pytest.approx(100 * 767.8 / 783.5, abs=0.1)
    assert gemm["bound"] == "compute" and gemm["side"] == "compute"
    assert gemm["ridge"] == pytest.approx(783.5e12 / 3009.8e9)
    attention = by.loc[by.index.str.startswith("cudnn_generated_fort_native_sdpa")].iloc[0]
    assert attention["ncu_roofline_tflops"] < 6 < 300 < attention["tflops"]  # ncu's roofline alone: a few TFLOP/s
    add = by.loc[by.index.str.contains("CUDAFunctor_add")].iloc[0]
    assert add["bound"] == "memory" and add["side"] == "memory" and add["gbps"] > 1000
    assert frame["gain_ms"].isna().all()  # no times: nothing to gain said, rows by ncu's duration
    assert list(frame["duration_us"]) == sorted(frame["duration_us"], reverse=True)
    assert why_rows(frame)[0]["peak_tflops"] == 783.5


def test_a_kernel_asked_of_ncu_but_not_in_its_report_is_named(small):
    """On 2x H100 (docs/results/gpu_suite_2xh100_3c16fcf) one of the five kernels asked, a float multiply's
    `vectorized_elementwise_kernel<4, ...MulFunctor<float>...>`, had no launch in ncu's report while other
    instantiations of the same function did: the record names it and the view says so."""
    from perfconsole.core.profiling.ncu_kernels import not_profiled

    run = small.profile.tables["ncu_run"][0]
    launches = small.profile.tables["ncu_kernels"]
    assert not_profiled(run["kernels_asked"], launches) == []  # here every kernel asked was profiled
    adam = next(a for a in run["kernels_asked"] if "FusedAdamMathFunctor" in a)
    without = [r for r in launches if kernel_key(r["kernel"]) != kernel_key(adam)]
    assert not_profiled(run["kernels_asked"], without) == [adam]
    small.profile.tables["ncu_run"] = [{**run, "kernels_not_profiled": [adam]}]
    try:
        notes = kernel_why(small).notes
    finally:
        small.profile.tables["ncu_run"] = [run]
    missing = [n for n in notes if "not in its report" in n]
    assert len(missing) == 1 and missing[0].startswith(f"1 of the {len(run['kernels_asked'])} kernels asked")
    assert adam[:90] in missing[0]

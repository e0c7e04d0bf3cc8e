"""Nsight Compute's CSV pages (tests/fixtures/ncu, captured on an H100: README.md there) read with exact values:
the details page (metrics and rules), the raw page (a column a metric, a row of units), both together, and the
launch figures derived from them (FLOPs from the tensor pipes against ncu's own SASS-only roofline)."""
from __future__ import annotations

import math

import pytest

from perfconsole.core.profiling.errors import ProfileFormatError
from perfconsole.core.profiling.ncu_csv import looks_like_ncu, number, read_details, read_pages, read_raw, read_text, scale
from perfconsole.core.profiling.ncu_kernels import launch_frame, launch_rows, rule_rows
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "ncu"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
ATTENTION = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"
TRITON = "triton_poi_fused_add_mul_sigmoid_0"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def frame():
    return launch_frame(read_pages(_text("details.csv"), _text("raw.csv"))).set_index("kernel")


def test_units_as_ncu_prints_them():
    assert scale("us") == (1e-6, "second")
    assert scale("Mbyte") == (1e6, "byte")
    assert scale("Ghz") == (1e9, "hz")
    assert scale("Kbyte/block") == (1e3, "byte/block")
    assert scale("Tbyte/s") == (1e12, "byte/s")
    assert scale("register/thread") == (1.0, "register/thread")
    assert scale("%") == (1.0, "%")
    assert scale("msecond") == (1e-3, "second")
    assert number("137,438,953,472") == 137438953472
    assert number("267,986.98") == pytest.approx(267986.98)
    assert math.isnan(number("PolicySpread")) and math.isnan(number("")) and math.isnan(number("n/a"))


def test_details_page_metrics_and_rules():
    pages = read_details(_text("details.csv"))
    assert pages.launches == [0, 1, 2, 3, 4]
    m = pages.metrics.set_index(["id", "metric"])
    assert m.loc[(0, "Duration"), "value"] == pytest.approx(179.01e-6)
    assert m.loc[(0, "Duration"), "unit"] == "us"
    assert m.loc[(0, "Compute (SM) Throughput"), "value"] == pytest.approx(89.96)
    assert m.loc[(0, "Memory Throughput"), "value"] == pytest.approx(69.59)
    assert m.loc[(0, "Elapsed Cycles"), "value"] == 285565
    assert m.loc[(0, "SM Frequency"), "value"] == pytest.approx(1.58e9)
    assert m.loc[(0, "Dynamic Shared Memory Per Block"), "value"] == pytest.approx(213190)
    assert m.loc[(0, "sm__ops_path_tensor_src_bf16_dst_fp32.sum"), "value"] == 137438953472
    assert m.loc[(0, "Cluster Scheduling Policy"), "text"] == "PolicySpread"
    assert set(pages.metrics["kernel"]) >= {GEMM, ATTENTION, TRITON}
    r = pages.rules
    # Every launch has ncu's bottleneck rule (no estimate) and at least one rule with an estimated speedup.
    assert set(r[r["rule"] == "SOLBottleneck"]["id"]) == {0, 1, 2, 3, 4}
    assert r[r["rule"] == "SOLBottleneck"]["speedup_pct"].isna().all()
    gemm = r[(r["id"] == 0) & (r["rule"] == "TheoreticalOccupancy")].iloc[0]
    assert gemm["type"] == "OPT" and gemm["speedup_type"] == "local" and gemm["speedup_pct"] == pytest.approx(81.25)
    assert gemm["text"].startswith("The 3.00 theoretical warps per scheduler")


def test_raw_page_agrees_with_details():
    raw, details = read_raw(_text("raw.csv")), read_details(_text("details.csv"))
    assert raw.launches == details.launches and raw.rules.empty
    r = raw.metrics.set_index(["id", "metric"])["value"]
    d = details.metrics.set_index(["id", "metric"])["value"]
    for i in raw.launches:
        assert r[(i, "gpu__time_duration.sum")] == pytest.approx(d[(i, "Duration")], rel=1e-4)
        assert r[(i, "sm__throughput.avg.pct_of_peak_sustained_elapsed")] == pytest.approx(
            d[(i, "Compute (SM) Throughput")], abs=0.01)
        # Details rounds to two decimals of the unit it picked (Mbyte); raw keeps six.
        assert r[(i, "dram__bytes_read.sum")] == pytest.approx(d[(i, "dram__bytes_read.sum")], rel=1e-3, abs=1e4)
    assert r[(0, "launch__shared_mem_per_block_dynamic")] == pytest.approx(213188)


def test_base_units_page_reads_the_same_as_scaled_units():
    scaled = read_details(_text("details.csv")).metrics.set_index(["id", "metric"])["value"]
    base = read_details(_text("details_base_units.csv")).metrics.set_index(["id", "metric"])["value"]
    for key in [(0, "Duration"), (3, "Duration"), (0, "dram__bytes_read.sum"), (4, "SM Frequency"),
                (1, "Dynamic Shared Memory Per Block")]:
        assert base[key] == pytest.approx(scaled[key], rel=5e-3), key


def test_tensor_flops_counted_where_ncu_roofline_sees_none(frame):
    gemm, attn, add = frame.loc[GEMM], frame.loc[ATTENTION], frame[frame.index.str.contains("CUDAFunctor_add")].iloc[0]
    # The 4096^3 bf16 GEMM: exactly 2 M N K from the tensor pipes; no SASS FLOPs at all.
    assert gemm["flops"] == 2 * 4096**3 and gemm["tensor_flops"] == 2 * 4096**3
    assert gemm["ncu_roofline_flops"] == 0 and gemm["precision"] == "bf16"
    assert gemm["flops"] / gemm["duration_s"] / 1e12 == pytest.approx(767.8, abs=0.1)
    # Causal flash attention, batch 4, 16 heads, 2048 tokens, head 64: between half (the causal triangle) and all
    # of 4 b h s^2 d, tiles on the diagonal computed whole. ncu's roofline (SASS only) reads 1-2 % of it.
    full = 4 * 4 * 16 * 2048**2 * 64
    assert full / 2 < attn["flops"] < full
    assert attn["ncu_roofline_flops"] / attn["flops"] < 0.02
    assert attn["flops"] / attn["duration_s"] / 1e12 == pytest.approx(362.7, abs=0.1)
    assert add["tensor_flops"] == 0 and add["flops"] == add["ncu_roofline_flops"] > 0 and add["precision"] == "fp32"
    assert set(frame["flops_source"]) == {"tensor pipes + sass"}


def test_launch_figures(frame):
    gemm = frame.loc[GEMM]
    assert gemm["compute_pct"] == pytest.approx(89.962237) and gemm["memory_pct"] == pytest.approx(69.586581)
    assert gemm["achieved_occupancy_pct"] == pytest.approx(14.636103)
    assert gemm["theoretical_occupancy_pct"] == pytest.approx(18.75)
    assert gemm["registers_per_thread"] == 168 and gemm["blocks"] == 132 and gemm["threads_per_block"] == 384
    assert gemm["dram_bytes"] == pytest.approx(150492672 + 28241408)
    assert gemm["rule"] == "TheoreticalOccupancy" and gemm["rule_speedup_pct"] == pytest.approx(81.25)
    assert gemm["rule_text"].endswith("hardware maximum of 16.")
    assert gemm["bottleneck"] and "\n" not in gemm["bottleneck"]
    assert frame.loc[TRITON, "rule"] == "AchievedOccupancy"
    assert frame.loc[TRITON, "rule_speedup_pct"] == pytest.approx(17.78)


def test_rows_for_the_record_are_json_plain():
    import json

    pages = read_pages(_text("details.csv"), _text("raw.csv"))
    rows, rules = launch_rows(pages), rule_rows(pages)
    assert len(rows) == 5 and {r["id"] for r in rows} == {0, 1, 2, 3, 4}
    json.dumps({"k": rows, "r": rules}, allow_nan=False)  # NaN became None
    assert all(isinstance(r["id"], int) for r in rows)


def test_page_told_by_its_header_and_bad_input():
    assert read_text(_text("raw.csv")).page == "raw" and read_text(_text("details.csv")).page == "details"
    assert looks_like_ncu(_text("details.csv")) and not looks_like_ncu("Time (%),Total Time (ns)\n1,2\n")
    with pytest.raises(ProfileFormatError, match="no ncu CSV header"):
        read_text("==PROF== No kernels were profiled.\n")
    with pytest.raises(ProfileFormatError, match="not ncu's details page"):
        read_details('"ID","Kernel Name"\n"0","k"\n')
    # ncu's own lines around the table (profiling while printing CSV) are skipped.
    noisy = "==PROF== Connected to process 1\n" + _text("details.csv") + "==PROF== Disconnected from process 1\n"
    assert read_details(noisy).launches == [0, 1, 2, 3, 4]

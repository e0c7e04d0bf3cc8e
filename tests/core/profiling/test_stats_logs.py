"""`nsys stats` console logs: CSV stdout captures and the default column tables.

FORMATS.md §6-7 has one real capture (moeresearch/AT_ON_CG_ON_cuda_api_sum_head.txt, tested in
test_csv_fixtures.py) and states the rest as facts without a fixture: the Processing/Running lines,
the 2022 same-line `SKIPPED:`, the 2025 next-line `SKIPPED:`, the ` ** Title (report):` lines and the
thousands separators of the column format. The inputs below are built from exactly those facts; the
column layout (header over a row of dashes, values cut to ~100 characters with an ellipsis) is nsys's
`--format column` as printed by 2023-2025 versions, not a saved fixture.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from perfconsole.core.profiling.errors import ProfileError
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.stats_text import parse_stats_text
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "nsys"
KERN_HEADER = "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name"
REPORTS = "/usr/local/cuda-13.0/nsight-systems-2025.3.2/host-linux-x64/reports"

LONG = "void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float, at::n"


def column_log() -> str:
    # Column widths as nsys pads them: each column as wide as its widest cell, two spaces apart.
    name_w = 100
    kern = [
        "",
        f"Processing [/tmp/run.sqlite] with [{REPORTS}/cuda_gpu_kern_sum.py]... ",
        "",
        " ** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):",
        "",
        " Time (%)  Total Time (ns)  Instances   Avg (ns)    Med (ns)   Min (ns)  Max (ns)   StdDev (ns)  "
        + "Name".center(name_w),
        " --------  ---------------  ---------  ----------  ----------  --------  ---------  -----------  " + "-" * name_w,
        "     64.8       66,765,280        217   307,674.1   141,825.0   140,674  1,045,003    235,537.4  "
        + "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_exe\u2026",
        "      2.8        2,930,000        434     6,750.9     6,752.0     5,984     8,352        589.0  "
        + LONG[:99] + "\u2026",
        "      0.1          100,000         10    10,000.0    10,000.0     9,000    11,000        500.0  "
        + "cunn_SoftMaxForward",
        "",
    ]
    skipped_next_line = [
        f"Processing [/tmp/run.sqlite] with [{REPORTS}/cuda_gpu_mem_size_sum.py]... ",
        "SKIPPED: /tmp/run.sqlite does not contain GPU memory data.",
        "",
    ]
    skipped_same_line = [
        "Running [/usr/local/cuda-11.7/nsight-systems-2022.1.3/target-linux-x64/reports/nvtxsum.py run.sqlite]... "
        "SKIPPED: run.sqlite does not contain NV Tools Extension (NVTX) data.",
        "",
    ]
    api = [
        f"Processing [/tmp/run.sqlite] with [{REPORTS}/cuda_api_sum.py]... ",
        "",
        " ** CUDA API Summary (cuda_api_sum):",
        "",
        " Time (%)  Total Time (ns)  Num Calls  Avg (ns)  Med (ns)  Min (ns)  Max (ns)  StdDev (ns)      Name     ",
        " --------  ---------------  ---------  --------  --------  --------  --------  -----------  ------------",
        "     90.0        3,481,709        100  34,817.1  30,000.0    20,000    90,000     10,000.0  cudaMalloc  ",
        "     10.0          386,856         10  38,685.6  38,000.0    30,000    45,000      5,000.0  cudaFree    ",
        "",
    ]
    return "\n".join(kern + skipped_next_line + skipped_same_line + api) + "\n"


def test_column_tables_parse_with_thousands_separators() -> None:
    out = parse_stats_text(column_log(), "stats.log")
    assert set(out.tables) == {"cuda_gpu_kern_sum", "cuda_api_sum"}
    kern = out.tables["cuda_gpu_kern_sum"]
    assert len(kern) == 3
    assert kern[0]["total_time_ns"] == 66765280
    assert kern[0]["avg_ns"] == 307674
    assert kern[0]["max_ns"] == 1045003
    api = out.tables["cuda_api_sum"]
    assert [(r["name"], r["num_calls"], r["total_time_ns"]) for r in api] == [
        ("cudaMalloc", 100, 3481709), ("cudaFree", 10, 386856)]


def test_skipped_reports_are_absent_not_empty() -> None:
    out = parse_stats_text(column_log(), "stats.log")
    assert "cuda_gpu_mem_size_sum" not in out.tables
    assert "nvtx_sum" not in out.tables
    assert set(out.skipped) == {"cuda_gpu_mem_size_sum", "nvtx_sum"}
    assert any("stats.log:" in w and "cuda_gpu_mem_size_sum absent" in w for w in out.warnings)
    assert any("nvtx_sum absent" in w and "NV Tools Extension" in w for w in out.warnings)


def test_ellipsis_truncated_names_are_flagged() -> None:
    kern = parse_stats_text(column_log(), "stats.log").tables["cuda_gpu_kern_sum"]
    assert [r["truncated"] for r in kern] == [True, True, False]
    assert kern[1]["name"].startswith("void at::native::vectorized_elementwise_kernel<")


def test_csv_capture_with_preamble_and_two_reports() -> None:
    """Several reports in one stdout capture, each after its Processing line (FORMATS.md §6)."""
    head = (FIXTURES / "moeresearch" / "AT_ON_CG_ON_cuda_api_sum_head.txt").read_text()
    text = head + "\n".join([
        f"Processing [/tmp/x.sqlite] with [{REPORTS}/cuda_gpu_kern_sum.py]... ",
        KERN_HEADER,
        '60.0,600,2,300.0,300.0,200,400,141.4,"kern<a, b>(int, float)"',
        "40.0,400,1,400.0,400.0,400,400,0.0,ampere_sgemm_128x64_tn",
        f"Processing [/tmp/x.sqlite] with [{REPORTS}/nvtx_sum.py]... ",
        "SKIPPED: /tmp/x.sqlite does not contain NV Tools Extension (NVTX) data.",
    ]) + "\n"
    out = parse_stats_text(text, "capture.txt")
    assert len(out.tables["cuda_api_sum"]) == 13
    assert [r["name"] for r in out.tables["cuda_gpu_kern_sum"]] == ["kern<a, b>(int, float)", "ampere_sgemm_128x64_tn"]
    assert "nvtx_sum" not in out.tables
    assert out.skipped == ["nvtx_sum"]


def test_processing_line_with_output_is_not_a_header() -> None:
    text = ("Generating SQLite file phase0_rank0.sqlite from phase0_rank0.nsys-rep\n"
            "Processing 3327753 events: [1%  ][2%  ][3%  ]\n"
            "Processing [phase0_rank0.sqlite] with [/opt/nvidia/hpc_sdk/reports/nvtx_pushpop_sum.py] to "
            "[nvtx_pushpop_sum_nvtx_pushpop_sum.csv]... PROCESSED\n\n")
    assert parse_stats_text(text, "nsys_stats.stdout").tables == {}


def test_log_with_only_skipped_reports_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "stats.log"
    log.write_text(f"Processing [/tmp/run.sqlite] with [{REPORTS}/cuda_gpu_kern_sum.py]... \n"
                   "SKIPPED: /tmp/run.sqlite does not contain CUDA kernel data.\n")
    with pytest.raises(ProfileError, match=r"stats\.log:2: cuda_gpu_kern_sum absent"):
        load_profile(log)


def test_nvtx_kern_sum_header_with_empty_range() -> None:
    """FORMATS.md §2.4: the 13-column header; kernels outside any range start with `,,`."""
    text = "\n".join([
        "NVTX Range,Style,PID,TID,NVTX Inst,Kern Inst,Total Time (ns),Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Kernel Name",
        ":forward,PushPop,101,101,10,200,5000000,25000.0,24000.0,20000,40000,3000.5,ampere_sgemm_128x64_tn",
        ",,101,101,0,5,1000,200.0,200.0,150,250,30.0,\"void at::native::vectorized_elementwise_kernel<4, a, b>(int)\"",
    ]) + "\n"
    rows = parse_stats_text(text, "x_nvtx_kern_sum.csv", "nvtx_kern_sum").tables["nvtx_kern_sum"]
    assert rows[0] == {"style": "PushPop", "pid": 101, "tid": 101, "nvtx_inst": 10, "kern_inst": 200,
                       "total_time_ns": 5000000, "avg_ns": 25000, "med_ns": 24000, "min_ns": 20000, "max_ns": 40000,
                       "stddev_ns": 3000, "name": "ampere_sgemm_128x64_tn", "domain": "", "range": "forward"}
    assert rows[1]["range"] == "" and rows[1]["domain"] == ""


def test_mem_size_and_pushpop_headers() -> None:
    size = parse_stats_text("Total (MB),Count,Avg (MB),Med (MB),Min (MB),Max (MB),StdDev (MB),Operation\n"
                            "2.097,3,0.699,0.524,0.000,1.573,0.800,[CUDA memcpy Peer-to-Peer]\n", "cuda_gpu_mem_size_sum.csv")
    row = size.tables["cuda_gpu_mem_size_sum"][0]
    assert row == {"total_mb": 2.097, "count": 3, "avg_mb": 0.699, "med_mb": 0.524, "min_mb": 0.0, "max_mb": 1.573,
                   "stddev_mb": 0.8, "operation": "[CUDA memcpy Peer-to-Peer]"}
    pp = parse_stats_text("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Range\n"
                          "100.0,170,1,170.0,170.0,170,170,0.0,:mom_fluxes_copyout\n", "nvtx_pushpop_sum.csv")
    assert pp.tables["nvtx_pushpop_sum"][0]["range"] == "mom_fluxes_copyout"


def test_timeunit_in_header_is_converted() -> None:
    out = parse_stats_text("Time (%),Total Time (us),Instances,Avg (us),Med (us),Min (us),Max (us),StdDev (us),Name\n"
                           "100.0,1.5,2,0.750,0.750,0.5,1.0,0.354,k\n", "k_cuda_gpu_kern_sum.csv")
    row = out.tables["cuda_gpu_kern_sum"][0]
    assert (row["total_time_ns"], row["avg_ns"], row["min_ns"], row["stddev_ns"]) == (1500, 750, 500, 354)


def test_fully_quoted_csv_is_accepted() -> None:
    text = '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"\n' \
           '"100.0","10","1","10.0","10.0","10","10","0.0","k"\n'
    assert parse_stats_text(text, "q.csv").tables["cuda_gpu_kern_sum"][0]["total_time_ns"] == 10

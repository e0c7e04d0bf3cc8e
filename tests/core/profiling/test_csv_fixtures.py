"""Every real `nsys stats` fixture (tests/fixtures/nsys, see FORMATS.md there) parsed with exact values."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.profiling.columns import report_from_stem
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.settings import RunSpec

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nsys"

KERN_COLS_NEW = ["time_pct", "total_time_ns", "instances", "avg_ns", "med_ns", "min_ns", "max_ns", "stddev_ns", "name"]

# file -> (report, rows, first row subset)
EXPECTED = {
    "gpa/paddle_static_gpukernsum.csv": ("cuda_gpu_kern_sum", 80, {
        "time_pct": 14.3, "total_time_ns": 131335230, "instances": 1450, "avg_ns": 90576, "min_ns": 48224,
        "max_ns": 214048, "stddev_ns": 53846, "name": "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn"}),
    "gpa/demo_cuda_gpu_kern_sum.csv": ("cuda_gpu_kern_sum", 238, {
        "time_pct": 14.9, "total_time_ns": 316902963, "instances": 1240, "avg_ns": 255567, "med_ns": 195230,
        "min_ns": 7776, "max_ns": 34620644, "stddev_ns": 987464,
        "name": "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm *, unsigned long, ncclWork *)"}),
    "gpa/demo_cuda_gpu_mem_time_sum.csv": ("cuda_gpu_mem_time_sum", 4, {
        "time_pct": 98.1, "total_time_ns": 210555007, "count": 815, "avg_ns": 258350, "med_ns": 114238,
        "operation": "[CUDA memcpy Device-to-Device]"}),
    "gpa/llama2-70B-GBS512-FSDP256_cuda_gpu_kern_sum.csv": ("cuda_gpu_kern_sum", 175, {
        "total_time_ns": 17081723060, "instances": 2800, "med_ns": 5755643}),
    "gpa/llama2-70B-GBS512-FSDP256_cuda_gpu_mem_time_sum.csv": ("cuda_gpu_mem_time_sum", 3, {
        "total_time_ns": 153279737, "count": 905, "operation": "[CUDA memcpy Device-to-Device]"}),
    "moeresearch/AT_OFF_CG_OFF_cuda_gpu_kern_sum.csv": ("cuda_gpu_kern_sum", 88, {
        "time_pct": 79.8, "total_time_ns": 14198407375, "instances": 97620, "med_ns": 107872}),
    "moeresearch/AT_ON_CG_ON_cuda_api_sum.csv": ("cuda_api_sum", 44, {
        "time_pct": 72.1, "total_time_ns": 10414705400, "num_calls": 20599, "name": "cudaMemcpyAsync"}),
    "moeresearch/AT_ON_CG_ON_cuda_api_sum_head.txt": ("cuda_api_sum", 13, {
        "total_time_ns": 10414705400, "num_calls": 20599, "name": "cudaMemcpyAsync"}),
    "gptqmodel/llama32_1b_layers2_nvtx_sum.csv": ("nvtx_sum", 56, {
        "time_pct": 44.6, "total_time_ns": 273806224147, "instances": 1, "avg_ns": 273806224147,
        "stddev_ns": 0, "style": "PushPop", "domain": "", "range": "qvq_quantize.main"}),
    "gptqmodel/llama32_1b_full_osrt_sum.csv": ("osrt_sum", 57, {
        "time_pct": 68.1, "total_time_ns": 24855615436175, "num_calls": 1373, "stddev_ns": 48756284687, "name": "sem_wait"}),
}


def test_every_fixture_is_listed() -> None:
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*") if p.name != "SOURCE.txt"}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_parses_exactly(rel: str) -> None:
    report, n_rows, first = EXPECTED[rel]
    tables, warnings = load_profile(FIXTURES / rel)
    assert warnings == []
    assert list(tables) == [report]
    rows = tables[report]
    assert len(rows) == n_rows
    assert {k: rows[0][k] for k in first} == first
    totals = [r.get("total_time_ns") for r in rows]
    assert totals == sorted(totals, reverse=True)  # nsys sorts by total; parsing keeps the order
    # JSON-serialisable as the snapshot needs: the snapshot writer writes a ProfileTable as its rows
    record = RunRecord(RunSpec(), name="import", status="imported", profile=Profile("import", [], tables))
    assert json.loads(store.dumps(record))["data"]["profile"]["tables"] == {k: list(v) for k, v in tables.items()}


def test_line_count_matches_rows() -> None:
    for rel, (_, n_rows, _) in EXPECTED.items():
        if rel.endswith(".csv"):
            assert sum(1 for _ in (FIXTURES / rel).open()) == n_rows + 1, rel


def test_old_and_new_kernel_headers_normalise_alike() -> None:
    old = load_profile(FIXTURES / "gpa/paddle_static_gpukernsum.csv")[0]["cuda_gpu_kern_sum"]
    new = load_profile(FIXTURES / "gpa/demo_cuda_gpu_kern_sum.csv")[0]["cuda_gpu_kern_sum"]
    assert list(new[0]) == KERN_COLS_NEW
    assert list(old[0]) == [c for c in KERN_COLS_NEW if c != "med_ns"]  # old CSV has no Med column
    assert all(isinstance(r["avg_ns"], int) and isinstance(r["total_time_ns"], int) for r in old + new)


def test_longest_kernel_name_survives_whole() -> None:
    rows = load_profile(FIXTURES / "gpa/paddle_static_gpukernsum.csv")[0]["cuda_gpu_kern_sum"]
    longest = max(rows, key=lambda r: len(r["name"]))
    assert len(longest["name"]) == 3733
    assert longest["name"].startswith("void Eigen::internal::EigenMetaKernel<")
    quoted = [r for r in rows if "," in r["name"]]
    assert len(quoted) == 63  # FORMATS.md §1: 63 quoted (comma) names, each kept whole


def test_64bit_totals_are_exact() -> None:
    rows = load_profile(FIXTURES / "gptqmodel/llama32_1b_full_osrt_sum.csv")[0]["osrt_sum"]
    assert rows[0]["total_time_ns"] == 24855615436175
    assert max(r["stddev_ns"] for r in rows) == 131502518967  # 131502518966.8 rounded to int ns


def test_nvtx_domains_split_at_first_colon() -> None:
    rows = load_profile(FIXTURES / "gptqmodel/llama32_1b_layers2_nvtx_sum.csv")[0]["nvtx_sum"]
    by = {(r["domain"], r["range"]) for r in rows}
    assert ("", "stage.process:model.layers.1.mlp.down_proj") in by
    assert ("CCCL", "cub::DeviceSelect::Flagged") in by
    assert all("range" in r and "domain" in r for r in rows)


def test_directory_with_doubled_suffix_and_renamed_files(tmp_path: Path) -> None:
    src = FIXTURES / "moeresearch" / "AT_ON_CG_ON_cuda_api_sum.csv"
    (tmp_path / "nsys_report_rank0__cuda_api_sum_cuda_api_sum.csv").write_bytes(src.read_bytes())
    kern = FIXTURES / "gpa" / "demo_cuda_gpu_kern_sum.csv"
    (tmp_path / "cuda_gpu_kern_sum.csv").write_bytes(kern.read_bytes())
    nvtx = FIXTURES / "gptqmodel" / "llama32_1b_layers2_nvtx_sum.csv"
    (tmp_path / "renamed_by_hand.csv").write_bytes(nvtx.read_bytes())  # no report in the name: header decides
    tables, warnings = load_profile(tmp_path)
    assert warnings == []
    assert {k: len(v) for k, v in tables.items()} == {"cuda_api_sum": 44, "cuda_gpu_kern_sum": 238, "nvtx_sum": 56}


@pytest.mark.parametrize("stem,report", [
    ("nsys_report_rank0__cuda_api_sum_cuda_api_sum", "cuda_api_sum"),
    ("nvtx_pushpop_sum_nvtx_pushpop_sum", "nvtx_pushpop_sum"),
    ("AT_OFF_CG_OFF_cuda_gpu_kern_sum", "cuda_gpu_kern_sum"),
    ("run_nvtx_kern_sum", "nvtx_kern_sum"),
    ("paddle_static_gpukernsum", "cuda_gpu_kern_sum"),
    ("x_gpumemsizesum", "cuda_gpu_mem_size_sum"),
    ("hand_renamed", None),
])
def test_report_from_file_stem(stem: str, report: str | None) -> None:
    assert report_from_stem(stem) == report

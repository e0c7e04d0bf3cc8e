"""`perfconsole import` of Nsight Compute's output, on the real pages in tests/fixtures/ncu/ (an H100): one page or
both, in a folder or alone, read into the tables `run --profile ncu` makes, so `kernels --why` reads an import; an
`.ncu-rep` without ncu on the machine is one line that says how to hand over its pages instead."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.ncu_import import load_report
from tests.helpers import FIXTURES, pc

NCU = FIXTURES / "ncu"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


def test_one_page_or_both_become_the_runs_ncu_tables(tmp_path):
    details, _ = load_profile(NCU / "details.csv")
    assert len(details["ncu_kernels"]) == 5 and len(details["ncu_rules"]) == 19
    assert details["ncu_run"][0]["pages"] == "details"
    for name in ("details.csv", "raw.csv"):
        shutil.copy(NCU / name, tmp_path / name)
    both, warnings = load_profile(tmp_path)
    assert not warnings and both["ncu_run"][0]["pages"] == "both"
    gemm = next(r for r in both["ncu_kernels"] if r["kernel"] == GEMM)
    alone = next(r for r in details["ncu_kernels"] if r["kernel"] == GEMM)
    # the raw page brings the FLOP counters the details page lacks
    assert gemm["flops"] and gemm["flops"] > 0 and (alone.get("flops") or 0) <= gemm["flops"]
    # a metric both pages name comes from the raw one, unrounded (89.962237 against the details page's 89.96)
    assert gemm["compute_pct"] == pytest.approx(alone["compute_pct"], abs=0.005)
    assert gemm["memory_pct"] == pytest.approx(alone["memory_pct"], abs=0.005)


def test_a_second_page_of_one_kind_is_named_and_ignored(tmp_path):
    for name in ("details.csv", "details_base_units.csv", "raw.csv"):
        shutil.copy(NCU / name, tmp_path / name)
    tables, warnings = load_profile(tmp_path)
    assert len(tables["ncu_kernels"]) == 5
    assert warnings == [f"{tmp_path / 'details_base_units.csv'}: a second ncu details page ignored"]


def test_an_ncu_report_without_ncu_says_how_to_hand_over_its_pages(tmp_path, monkeypatch):
    rep = tmp_path / "my report.ncu-rep"  # the real report of an H200 (README.md), under a name that needs quoting
    shutil.copy(NCU / "small.ncu-rep", rep)
    monkeypatch.setenv("PERFCONSOLE_NCU", str(tmp_path / "no-ncu"))
    tables, warnings = load_report(rep)
    assert tables == {} and "needs Nsight Compute's ncu" in warnings[0]
    assert f"`ncu --import '{rep}' --csv --page details > details.csv`" in warnings[0]


@pytest.mark.e2e
def test_import_of_an_ncu_report_without_ncu_is_one_error_and_no_snapshot(tmp_path):
    save = tmp_path / "import.json"
    done = pc("import", str(NCU / "small.ncu-rep"), "--save", str(save),
              env={**os.environ, "PERFCONSOLE_NCU": str(tmp_path / "no-ncu")})
    assert done.returncode == 2 and not save.exists()
    assert done.stderr.count("\n") == 1 and "needs Nsight Compute's ncu" in done.stderr, done.stderr


def test_the_small_reports_details_page_is_one_triton_kernel_and_its_rule():
    """small_details.csv is what ncu read back from small.ncu-rep on the machine that made it (README.md): the GPU
    test test_ncu_import_gpu.py checks that ncu still reads the committed report so."""
    tables, warnings = load_profile(NCU / "small_details.csv")
    assert not warnings and [len(tables["ncu_kernels"]), len(tables["ncu_rules"])] == [1, 1]
    k = tables["ncu_kernels"][0]
    assert k["kernel"] == "triton_poi_fused_add_mul_sigmoid_0" and k["cc"] == "9.0"
    assert (k["compute_pct"], k["memory_pct"], k["duration_s"]) == (54.51, 73.78, pytest.approx(31.36e-6))
    assert tables["ncu_rules"][0]["rule"] == "SOLBottleneck" and k["bottleneck"].startswith("Memory is more heavily")


def test_kernels_why_reads_an_import_and_says_it_has_no_steps(tmp_path):
    for name in ("details.csv", "raw.csv"):
        shutil.copy(NCU / name, tmp_path / name)
    save = tmp_path / "import.json"
    done = pc("import", str(tmp_path), "--save", str(save))
    assert done.returncode == 0, done.stderr
    out = pc("kernels", str(save), "--why", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    gemm = next(k for k in doc["kernels"] if k["name"] == GEMM)
    assert gemm["compute_pct"] == pytest.approx(89.96, abs=0.005) and gemm["bound"] == "compute"
    assert any("an import has no steps" in n for n in doc["notes"])

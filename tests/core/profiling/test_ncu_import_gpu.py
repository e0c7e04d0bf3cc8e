"""On the GPU machine: `perfconsole import` of a folder holding an Nsight Compute report (`.ncu-rep`) and an nsys
capture (`.nsys-rep`) of the same program (tests/fixtures/ncu/capture.py, its profiled round only), read through
ncu's and nsys's own exporters; each ncu kernel is joined to the nsys kernel summary by name, so the why view has
the capture's time for it.

    python -m pytest -m gpu tests/core/profiling/test_ncu_import_gpu.py -v -s
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from perfconsole.core.cli.profile_import import build_record
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.locate import find_nsys
from perfconsole.core.profiling.ncu_kernels import kernel_key
from perfconsole.core.profiling.ncu_report import find_ncu
from perfconsole.core.reports.kernel_why import kernel_why
from tests.helpers import FIXTURES

pytestmark = pytest.mark.gpu

CAPTURE = FIXTURES / "ncu" / "capture.py"


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_an_ncu_report_beside_an_nsys_capture_joins_by_kernel_name(tmp_path):
    ncu, nsys = find_ncu(), find_nsys(None)
    if not _cuda() or ncu is None or nsys is None:
        pytest.skip("needs a CUDA GPU, ncu and nsys")
    folder = tmp_path / "both"
    folder.mkdir()
    ran = subprocess.run([ncu, "--profile-from-start", "off", "--target-processes", "application-only",
                          "--filter-mode", "per-launch-config", "--launch-count", "1", "--section", "SpeedOfLight",
                          "--export", str(folder / "capture"), "--force-overwrite", sys.executable, str(CAPTURE)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    ran = subprocess.run([nsys.path, "profile", "--capture-range", "cudaProfilerApi",
                          "--capture-range-end", "stop", "--trace", "cuda", "-o", str(folder / "capture"),
                          "--force-overwrite", "true", sys.executable, str(CAPTURE)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    tables, warnings = load_profile(folder)
    assert "ncu_kernels" in tables and "cuda_gpu_kern_sum" in tables, (sorted(tables), warnings)
    record = build_record(folder, tables, warnings)
    why = kernel_why(record)
    assert not why.missing and len(why.rows) >= 4
    nsys_ns = {kernel_key(r["name"]): r["total_time_ns"] for r in tables["cuda_gpu_kern_sum"]}
    joined = [w for w in why.rows if w.get("ms_per_step") is not None]
    print("\n" + "\n".join(f"{w['ms_per_step']:.3f} ms  {w['name'][:90]}" for w in why.rows))
    assert len(joined) >= 4, [w["name"] for w in why.rows]  # the GEMM, the norm, the add, attention, Triton's kernel
    for w in joined:
        assert w["ms_per_step"] == pytest.approx(nsys_ns[w["key"]] / 1e6, rel=1e-6)
    assert any("an import has no steps" in n for n in why.notes)


def test_ncu_reads_the_committed_report_as_its_committed_details_page():
    """tests/fixtures/ncu/small.ncu-rep through this machine's ncu (`perfconsole import`'s path for a report) gives
    the kernels and rules of small_details.csv, the page ncu printed for it where it was made."""
    if find_ncu() is None:
        pytest.skip("needs ncu")
    from perfconsole.core.profiling.ncu_import import load_report

    from_rep, warnings = load_report(FIXTURES / "ncu" / "small.ncu-rep")
    from_page, _ = load_profile(FIXTURES / "ncu" / "small_details.csv")
    assert not warnings and "ncu_kernels" in from_rep, warnings
    assert [r["kernel"] for r in from_rep["ncu_kernels"]] == ["triton_poi_fused_add_mul_sigmoid_0"]
    rep, page = from_rep["ncu_kernels"][0], from_page["ncu_kernels"][0]
    for key in ("compute_pct", "memory_pct", "dram_pct", "duration_s"):  # the raw page's figures are unrounded
        assert rep[key] == pytest.approx(page[key], rel=1e-3), key
    assert rep["bottleneck"] == page["bottleneck"]
    assert [r["rule"] for r in from_rep["ncu_rules"]] == [r["rule"] for r in from_page["ncu_rules"]]

"""A raw page made without `--metrics` holds the roofline section's rates, not counts: `dram__bytes.sum.per_second`
and the SASS counters' `.sum.per_cycle_elapsed` (with `smsp__cycles_elapsed.avg.per_second`). Times the launch's
duration they are its DRAM bytes and FLOPs, so such a page has a roofline.

The page is tests/fixtures/ncu/raw.csv (a real raw page of an H100) without the columns its `--metrics` list added
(README.md there: the DRAM read/write counts, the tensor pipes' and the SASS counters' counts): what ncu prints
with the sections alone. The full page's counts are the check."""
from __future__ import annotations

import csv
import io

import pytest

from perfconsole.core.profiling.ncu_import import ncu_tables
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.reports.kernel_why import kernel_why, peaks_of
from perfconsole.core.reports.roofline import roofline_lines
from perfconsole.core.settings import RunSpec
from helpers import FIXTURES

RAW = (FIXTURES / "ncu" / "raw.csv").read_text(encoding="utf-8")
TRITON = "triton_poi_fused_add_mul_sigmoid_0"


def _from_metrics(name: str) -> bool:
    base = name.split(".")[0]
    return (base in ("dram__bytes_read", "dram__bytes_write") or base.startswith("sm__ops_path_tensor_")
            or (base.startswith("smsp__sass_thread_inst_executed_op_") and not name.endswith(".per_cycle_elapsed")))


def _sections_only() -> str:
    rows = list(csv.reader(io.StringIO(RAW)))
    keep = [i for i, name in enumerate(rows[0]) if not _from_metrics(name)]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    for row in rows:
        writer.writerow([row[i] for i in keep])
    return out.getvalue()


def test_the_rates_give_the_counts_bytes_and_flops():
    page = _sections_only()
    assert "dram__bytes_read.sum" not in page and "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum\"" not in page
    assert "dram__bytes.sum.per_second" in page
    rates = {k["kernel"]: k for k in ncu_tables(None, page, "sections")["ncu_kernels"]}
    counts = {k["kernel"]: k for k in ncu_tables(None, RAW, "raw.csv")["ncu_kernels"]}
    assert rates.keys() == counts.keys() and len(rates) == 5
    for name, k in rates.items():
        full = counts[name]
        assert k["dram_bytes"] == pytest.approx(full["dram_bytes"], rel=1e-5), name   # read + write, counted
        assert k["flops_fp32"] == pytest.approx(full["flops_fp32"], rel=1e-5, abs=1.0), name
        assert k["flops_source"] == "sass" and k["ncu_roofline_flops"] == pytest.approx(k["flops"])
    # the Triton kernel: 67,108,864 fadd + 67,108,864 fmul + 2 x 33,554,432 ffma
    assert rates[TRITON]["flops_fp32"] == pytest.approx(201_326_592, rel=1e-5)


def test_a_page_of_rates_draws_a_roofline():
    record = RunRecord(RunSpec(), name="import sections.csv", status="imported",
                       profile=Profile("import", [], ncu_tables(None, _sections_only(), "sections")))
    why = kernel_why(record)
    placed = [r for r in why.rows if r["intensity"] and r["tflops"]]
    assert len(placed) == 4  # the GEMM's work is on the tensor pipes, which no section counts
    picture = roofline_lines(why.rows, peaks_of(record), ascii_only=True)
    assert picture and any(TRITON in line for line in picture)

"""The grids a viewer draws from sweeps and attention grids: rows, columns, statuses and values,
on made-up records and on the real H200 snapshots in tests/fixtures/grids/."""
from __future__ import annotations

from pathlib import Path

import pytest
from test_reports import attention_record, sweep_record

from perfconsole.core import store
from perfconsole.core.reports import attention as report_attention
from perfconsole.core.reports import sweep as report_sweep

GRIDS = Path(__file__).resolve().parents[2] / "fixtures" / "grids"


def test_sweep_grid_has_sizes_as_rows_and_contexts_as_columns():
    tables = report_sweep.grid_tables(sweep_record())
    assert [t.title for t in tables] == ["train · fp32", "train · bf16"]
    fp32 = tables[0]
    assert (fp32.row_name, fp32.col_name, fp32.rows, fp32.cols) == ("size", "ctx", ("small", "medium"), (128, 256))
    assert fp32.cell("small", 128).values == (35.0,) and fp32.cell("small", 128).status == "ok"
    assert fp32.cell("medium", 128).values == (100.0,)
    oom = fp32.cell("medium", 256)
    assert (oom.status, oom.values, oom.error) == ("oom", (None,), "CUDA out of memory")
    assert tables[1].cell("medium", 256).values == (75.0,)


def test_sweep_grid_metrics_and_unrun_cells():
    rec = sweep_record()
    rec.runs[0] = type(rec.runs[0])(rec.runs[0].spec)  # small ctx 128 fp32 back to pending
    tok = report_sweep.grid_tables(rec, "tokens_per_s")[0]
    assert tok.cell("small", 128).status == "not_run" and tok.cell("small", 128).values == (None,)
    small256 = next(r for r in rec.runs if (r.spec.size, r.spec.ctx, r.spec.precision) == ("small", 256, "fp32"))
    assert tok.cell("small", 256).values == (small256.summary.tokens_per_s,)
    peak = report_sweep.grid_tables(rec, "peak_mib")[0]
    assert peak.cell("small", 256).values == (None,)  # these records measured no memory
    with pytest.raises(ValueError, match="metric: must be one of step_ms, tokens_per_s, peak_mib"):
        report_sweep.grid_tables(rec, "flops")


def test_attention_grid_per_variant_with_forward_kept_on_backward_oom():
    tables = report_attention.grid_tables(attention_record())
    assert [t.title for t in tables] == ["naive · fp32", "naive+compile · fp32", "sdpa · fp32"]
    naive = tables[0]
    assert (naive.rows, naive.cols) == ((16, 32), (1024, 2048))
    assert naive.cell(16, 1024).values == (1.0, 2.0)
    oom = naive.cell(32, 2048)
    assert (oom.status, oom.values) == ("oom", (2.0, None))
    assert tables[2].cell(32, 2048).values == (0.5, 1.0)
    mem = report_attention.grid_tables(attention_record(), "memory_mib")[0]
    assert mem.cell(16, 2048).values == (400.0,)


def test_grids_of_the_real_h200_snapshots():
    sw = store.load(GRIDS / "sweep_train_fp32_bf16.json")
    fp32, bf16 = report_sweep.grid_tables(sw)
    assert fp32.rows == ("small", "medium", "large", "xl", "2.7B") and fp32.cols == (128, 256, 512, 1024)
    assert f"{fp32.cell('2.7B', 1024).values[0]:,.2f}" == "2,060.08"   # as in the Markdown report
    assert f"{bf16.cell('xl', 512).values[0]:,.2f}" == "208.71"
    assert {c.status for row in fp32.cells + bf16.cells for c in row} == {"ok"}

    a = store.load(GRIDS / "attention_grid.json")
    naive, sdpa = report_attention.grid_tables(a)
    assert [naive.cell(d, 32768).status for d in (16, 32, 64)] == ["oom"] * 3
    assert [naive.cell(128, s).status for s in (8192, 16384, 32768)] == ["cancelled", "not_run", "not_run"]
    assert {c.status for row in sdpa.cells for c in row} == {"not_run"}
    fwd, bwd = naive.cell(16, 16384).values
    assert (f"{fwd:.3f}", f"{bwd:.3f}") == ("28.906", "44.579")
    mem = report_attention.grid_tables(a, "memory_mib")[0]
    assert mem.cell(16, 16384).values == (8552.0,)


def test_a_sweep_of_a_factory_model_is_named_for_it_and_leaves_unknown_dimensions_empty():
    from test_reports import _finish

    from perfconsole.core.cli.sweep import grid_table
    from perfconsole.core.grids.sweep import SweepRecord, SweepSpec
    from perfconsole.core.settings import RunSpec

    base = RunSpec(model="docs/examples/student_model.py:build", size="tiny", device="cpu", warmup=1, steps=3)
    sw = SweepRecord.new(SweepSpec(base, ("tiny",), (32,), ("fp32",), ("fwd_bwd",), (1,)))
    _finish(sw.runs[0], 1.0, 2.0, 0.0)
    sw.status = "ok"
    assert sw.name == "sweep student_model.py:build ctx 32 fp32 fwd_bwd"   # not the unused size field, "tiny"
    row = [line for line in report_sweep.markdown(sw).splitlines() if line.startswith("| student_model.py:build")]
    assert row and row[0].startswith("| student_model.py:build | - | - | - | - | 32 | ok |"), row
    assert report_sweep.csv_text(sw).splitlines()[1].startswith("student_model.py:build,,,,,32,")
    table = grid_table(sw)
    assert table.columns[0].header == "model" and table.rows[0][0].plain == "student_model.py:build"


def test_a_running_or_pending_cell_is_never_an_error():
    assert report_sweep.grid_status("running") == "running"
    assert report_sweep.grid_status("pending") == "not_run"
    assert report_sweep.grid_status("unsupported") == "unsupported"   # a rung this machine cannot run
    assert report_sweep.grid_status("error") == "error" and report_sweep.grid_status("imported") == "ok"
    rec = sweep_record()
    rec.runs[0] = type(rec.runs[0])(rec.runs[0].spec)
    rec.runs[0].status = "running"
    assert report_sweep.grid_tables(rec)[0].cell("small", 128).status == "running"

"""The scaling curve (`perfconsole scale`): its counts' specs under weak and strong scaling, what it refuses
before any process starts (in-process here: the tiers guard fails a test that starts a worker or torchrun
unmarked), and its report on a real CPU curve of the tiny model, 1, 2 and 4 gloo processes
(tests/fixtures/scale/)."""
from __future__ import annotations

import csv
import io
import json

import pytest

from perfconsole.core import store
from perfconsole.core.cli.main import main
from perfconsole.core.cli.spec_args import check_gpus
from perfconsole.core.grids.scale import ScaleRecord, ScaleSpec
from perfconsole.core.reports import scale as report
from perfconsole.core.reports.export import export
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.core.telemetry.nvml import visible_gpus
from tests.helpers import FIXTURES

BASE = RunSpec(size="tiny", ctx=32, batch=4, device="cpu", warmup=1, steps=2, parallel="ddp", bucket_mb=25.0)
CURVE = FIXTURES / "scale" / "scale_tiny_cpu.json"
TINY = ["--size", "tiny", "--device", "cpu", "--ctx", "32", "--warmup", "1", "--steps", "2"]


def test_count_one_is_the_one_process_program_and_each_job_keeps_the_spec():
    spec = ScaleSpec.of(BASE, (1, 2, 4)).validate()
    one, two, four = spec.cells()
    assert (one.nproc, one.parallel, one.bucket_mb, one.batch) == (1, "none", None, 4)   # no wrapper
    assert [(c.nproc, c.parallel, c.bucket_mb, c.batch) for c in (two, four)] == [(2, "ddp", 25.0, 4), (4, "ddp", 25.0, 4)]
    assert not spec.added_one and spec.counts == (1, 2, 4)


def test_strong_scaling_splits_the_batch_and_the_one_process_run_is_added_first():
    spec = ScaleSpec.of(BASE, (4, 2), strong=True).validate()
    assert spec.counts == (1, 2, 4) and spec.added_one
    assert [c.batch for c in spec.cells()] == [4, 2, 1]
    with pytest.raises(SpecError) as e:
        ScaleSpec.of(BASE.with_(batch=3), (1, 2), strong=True).validate()
    assert e.value.field == "batch" and "divide by every count" in str(e.value) and "by 2" in str(e.value)
    for counts, field in (((1,), "nproc"), ((2, 2), "nproc"), ((1, 65), "nproc")):
        with pytest.raises(SpecError) as e:
            ScaleSpec.of(BASE, counts).validate()
        assert e.value.field == field


def test_a_count_beyond_the_visible_gpus_is_refused():
    visible = len(visible_gpus())    # this machine's, by the rule `run --nproc` uses
    check_gpus(visible, visible)     # as many as there are: no refusal
    with pytest.raises(SpecError) as e:
        check_gpus(visible + 1, visible)
    assert e.value.field == "nproc" and f"need {visible + 1} GPUs, but {visible} are visible" in str(e.value)


def test_refusals_exit_2_in_one_line_before_any_process(tmp_path, capsys):
    save = tmp_path / "curve.json"
    assert main(["scale", *TINY, "--batch", "3", "--strong", "--nproc", "1,2", "--save", str(save)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "batch: --strong splits the global batch 3" in err
    assert main(["scale", *TINY[:2], "--device", "cuda", "--nproc", "1,64", "--save", str(save)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    if visible_gpus():
        assert f"nproc: 64 processes need 64 GPUs, but {len(visible_gpus())} are visible" in err
    else:
        assert "device: cuda, but no NVIDIA GPU is visible" in err
    assert main(["scale", *TINY, "--nproc", "1,2", "--parallel", "none"]) == 2
    assert "parallel: must be one of ddp, fsdp" in capsys.readouterr().err
    assert main(["scale", *TINY]) == 2 and "give the process counts" in capsys.readouterr().err
    assert not save.exists()


def test_the_report_divides_the_one_process_median_by_each_counts():
    curve = store.load(CURVE)
    assert isinstance(curve, ScaleRecord) and [r.summary.world_size for r in curve.runs] == [1, 2, 4]
    medians = [r.summary.total_ms.median for r in curve.runs]
    rs = report.rows(curve)
    assert [r.efficiency for r in rs] == pytest.approx([1.0, medians[0] / medians[1], medians[0] / medians[2]])
    assert [r.per_rank_batch for r in rs] == [4, 4, 4] and [r.global_batch for r in rs] == [4, 8, 16]
    assert rs[0].exposed_comm_ms is None and rs[2].exposed_comm_ms == curve.runs[2].summary.exposed_comm_ms
    assert rs[2].link_busbw_gbps == curve.runs[2].collectives["link_busbw_gbps"] > 0
    assert rs[1].tokens_per_s == curve.runs[1].summary.tokens_per_s
    strong = ScaleRecord(ScaleSpec(curve.spec.base, curve.spec.counts, strong=True), curve.runs)
    assert [r.efficiency for r in report.rows(strong)] == pytest.approx(
        [1.0, medians[0] / (2 * medians[1]), medians[0] / (4 * medians[2])])
    assert report.efficiency_label(strong) == "strong scaling"


def test_the_exports_have_the_table_and_the_bars():
    curve = store.load(CURVE)
    md = export(curve, "md")
    rs = report.rows(curve)
    assert "| processes | batch/rank | status | step (ms) |" in md and "weak scaling" in md
    assert f"| 4 | 4 | ok | {rs[2].median_ms:,.2f} | [" in md
    bars = md.split("```")[1].strip().splitlines()
    assert bars[1].startswith("1 process ") and "one process, no communication" in bars[1]
    assert bars[3].startswith("4 processes") and f"exposed {rs[2].exposed_comm_ms:,.1f} ms" in bars[3]
    assert bars[3].count("█") + bars[3].count("▒") == 40     # the longest step fills the width
    assert "▒" in bars[3]
    table = list(csv.DictReader(io.StringIO(export(curve, "csv"))))
    assert [int(r["processes"]) for r in table] == [1, 2, 4]
    doc = json.loads(export(curve, "json"))
    assert doc["kind"] == "scale" and doc["counts"][1]["efficiency"] == pytest.approx(rs[1].efficiency)


def test_a_stopped_curve_reopens_only_its_unfinished_counts():
    curve = store.loads(store.dumps(store.load(CURVE)))
    curve.runs[2].status = "cancelled"
    assert curve.reopen() == [4]
    assert [r.status for r in curve.runs] == ["ok", "ok", "pending"] and curve.status == "pending"
    assert curve.runs[2].spec.nproc == 4 and curve.cell_seconds[2] is None

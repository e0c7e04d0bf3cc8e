"""Exports of sweeps and attention grids through `perfconsole export`, with computed findings checked."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.grids.attention import AttentionRecord, AttentionSpec
from perfconsole.core.record import Profile
from perfconsole.core.reports.sweep import kernel_findings
from perfconsole.core.settings import RunSpec
from perfconsole.core.stats import summarize
from perfconsole.core.grids.sweep import SweepRecord, SweepSpec


def _finish(run, fwd: float, bwd: float, opt: float) -> None:
    run.apply(ev.RunStarted(run.spec.to_dict(), {"gpu_name": "Test GPU", "torch": "2.x"}, 1))
    for i, scale in enumerate((3.0, 1.0, 1.0, 1.0)):  # a slow first warm-up step, then steady
        run.apply(ev.Step(i, i == 0, (fwd + bwd + opt) * scale, fwd * scale, bwd * scale, opt * scale))
    run.apply(ev.Finished("ok"))


def _oom(run) -> None:
    run.apply(ev.Error("oom", "CUDA out of memory"))
    run.apply(ev.Finished("oom"))


def sweep_record() -> SweepRecord:
    base = RunSpec(size="small", batch=4, warmup=1, steps=3, mode="train")
    rec = SweepRecord.new(SweepSpec(base, ("small", "medium"), (128, 256), ("fp32", "bf16"), ("train",), (1,)))
    times = {("small", 128, "fp32"): (10, 20, 5), ("small", 256, "fp32"): (20, 40, 5),
             ("medium", 128, "fp32"): (30, 60, 10), ("small", 128, "bf16"): (10, 20, 5),
             ("small", 256, "bf16"): (10, 20, 5), ("medium", 128, "bf16"): (10, 20, 5),
             ("medium", 256, "bf16"): (20, 40, 15)}
    for r in rec.runs:
        key = (r.spec.size, r.spec.ctx, r.spec.precision)
        _finish(r, *times[key]) if key in times else _oom(r)
    rec.status = "ok"
    return rec


def _export(tmp_path, obj, fmt: str) -> str:
    path = store.save(obj, tmp_path / f"{obj.kind}.json")
    p = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "export", str(path), "--format", fmt],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_sweep_markdown_tables_and_findings(tmp_path):
    md = _export(tmp_path, sweep_record(), "md")
    assert "- device: Test GPU" in md
    assert ("| size | d_model | d_ff | layers | heads | ctx | status | fwd mean (ms) | fwd std (ms) | bwd mean (ms) "
            "| bwd std (ms) | opt mean (ms) | total (ms) | tokens/s | peak alloc (MiB) |") in md
    assert "| small | 768 | 3072 | 12 | 12 | 128 | ok | 10.00 | 0.00 | 20.00 | 0.00 | 5.00 | **35.00** | 14,629 | - |" in md
    assert "| medium | 1024 | 4096 | 24 | 16 | 256 | **OOM** | - |" in md
    assert "| medium | 128 | train | bf16 | 100.00 | 35.00 | **2.86x** |" in md
    assert "- backward / forward: 2.00 on average (2.00 – 2.00) over 7 cells" in md
    # small: 35/35 = 1.0x at 128, 65/35 at 256 -> geometric mean 1.36x; medium: 100/35
    assert "bf16 speedup over fp32 per size (geometric mean over contexts): small 1.36x, medium 2.86x" in md
    assert "- medium fits in bf16 at ctx 256 where fp32 runs out of memory" in md
    assert "OOM starts: medium fp32 train from ctx 256" in md


def test_sweep_csv_and_json(tmp_path):
    rows = list(csv.DictReader(io.StringIO(_export(tmp_path, sweep_record(), "csv"))))
    assert len(rows) == 8
    oom = next(r for r in rows if r["status"] == "oom")
    assert (oom["size"], oom["ctx"], oom["total_mean_ms"], oom["error"]) == ("medium", "256", "", "CUDA out of memory")
    ok = rows[0]
    assert float(ok["total_mean_ms"]) == 35.0 and float(ok["first_step_ms"]) == 105.0
    doc = json.loads(_export(tmp_path, sweep_record(), "json"))
    assert [r["status"] for r in doc["runs"]].count("oom") == 1
    assert doc["runs"][0]["forward_ms"] == 10 and doc["runs"][0]["backward_ms"] == 20


def test_unrun_cells_are_not_run_not_errors(tmp_path):
    rec = sweep_record()
    rec.runs[-1] = type(rec.runs[-1])(rec.runs[-1].spec)  # back to pending, as after a Ctrl-C
    rec.status = "cancelled"
    doc = json.loads(_export(tmp_path, rec, "json"))
    assert doc["runs"][-1]["status"] == "not_run" and doc["status"] == "cancelled"
    assert "| not run |" in _export(tmp_path, rec, "md")


def test_kernel_findings_top_kernel_and_matmul_share():
    rows = [{"name": "ampere_sgemm_128x64_tn", "total_time_ns": 600}, {"name": "elementwise_kernel<add>",
                                                                       "total_time_ns": 300},
            {"name": "cutlass::Kernel2<sgemm>", "total_time_ns": 100}]
    text = kernel_findings(Profile("nsys", [], {"cuda_gpu_kern_sum": rows}))
    assert text == "top kernel `ampere_sgemm_128x64_tn` 60.0% of kernel time; matmul 70.0%"
    assert kernel_findings(Profile("nsys", [], {"nvtx_sum": rows})) is None
    assert kernel_findings(None) is None


def attention_record() -> AttentionRecord:
    rec = AttentionRecord.new(AttentionSpec((16, 32), (1024, 2048), batch=8, compile=True, warmup=2, iters=3))
    for c in rec.cells:
        scale = {"naive": 1.0, "naive+compile": 0.5, "sdpa": 0.25}[c.cell.variant] * c.cell.seq / 1024
        c.apply(ev.RunStarted(c.cell.to_dict(), {"gpu_name": "Test GPU"}, 1))
        summary = {"forward_ms": summarize([scale * 1.0] * 3).to_dict(), "backward_ms": None,
                   "memory_before_backward_mib": 100.0 * (c.cell.seq / 1024) ** 2, "peak_allocated_mib": None}
        if c.cell.variant == "naive" and c.cell.seq == 2048 and c.cell.d == 32:
            c.apply(ev.SummaryReady(summary))
            c.apply(ev.Error("oom", "CUDA out of memory"))
            c.apply(ev.Finished("oom"))
            continue
        summary["backward_ms"] = summarize([scale * 2.0] * 3).to_dict()
        c.apply(ev.SummaryReady(summary))
        c.apply(ev.Finished("ok"))
    rec.status = "ok"
    return rec


def test_attention_markdown_side_by_side_and_findings(tmp_path):
    md = _export(tmp_path, attention_record(), "md")
    assert "## naive+compile · fp32" in md
    assert "| 32 | 2048 | 2.000 | 0.000 | - | - | 400.0 | - | **OOM** |" in md
    assert "| d | seq | naive fwd+bwd (ms) | naive+compile fwd+bwd (ms) | sdpa fwd+bwd (ms) | naive+compile speedup | sdpa speedup |" in md
    assert "| 16 | 1024 | 3.000 | 1.500 | 0.750 | **2.00x** | **4.00x** |" in md
    assert "| 32 | 2048 | **OOM** | 3.000 | 1.500 | - | - |" in md
    assert "- naive fp32 runs out of memory: d 32 from seq 2048 (1 of them in the backward, after the forward fit)" in md
    assert "- sdpa against naive: speedup 4.00x" in md
    assert "memory before backward grows 4.0x – 4.0x when seq doubles" in md


def test_attention_json_and_csv(tmp_path):
    doc = json.loads(_export(tmp_path, attention_record(), "json"))
    assert len(doc["cells"]) == 12
    oom = next(c for c in doc["cells"] if c["status"] == "oom")
    assert (oom["forward_ms"], oom["backward_ms"], oom["variant"]) == (2.0, None, "naive")
    rows = list(csv.DictReader(io.StringIO(_export(tmp_path, attention_record(), "csv"))))
    assert {r["variant"] for r in rows} == {"naive", "naive+compile", "sdpa"}


def test_markdown_keeps_small_tflops_significant():
    from pathlib import Path

    from perfconsole.core.reports.export import export

    md = export(store.load(Path(__file__).resolve().parents[3] / "snapshots" / "tiny-cpu-train-fp32.json"), "md")
    assert "| 3,008 | 0.0141 |" in md


def test_report_wording_counts_and_says_a_status_once():
    from perfconsole.core.record import RunRecord
    from perfconsole.core.reports import attention as report_attention
    from perfconsole.core.reports import run as report_run
    from perfconsole.core.settings import RunSpec

    one = AttentionRecord.new(AttentionSpec((16,), (1024,), batch=1, warmup=1, iters=1))
    assert "1 warm-up pass, then 1 timed forward and 1 timed backward pass per cell" in report_attention.markdown(one)
    r = RunRecord(RunSpec(size="tiny", device="cpu"))
    r.apply(ev.Error("unsupported", "unsupported: fp8 matmuls need device cuda"))
    r.apply(ev.Finished("unsupported"))
    assert "- status: **unsupported** (fp8 matmuls need device cuda)" in report_run.markdown(r)
    r = RunRecord(RunSpec(size="tiny", device="cpu"))
    r.apply(ev.Error("error", "worker died"))
    r.apply(ev.Finished("error"))
    assert "- status: **error** (worker died)" in report_run.markdown(r)

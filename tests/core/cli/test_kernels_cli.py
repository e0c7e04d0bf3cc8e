"""`perfconsole kernels RUN.json [--why] [--json]` through the real entry point, on the snapshot of a real
`--profile ncu` run (tests/fixtures/ncu/small_train_h100.json, an H100)."""
from __future__ import annotations

import json
from pathlib import Path
from helpers import pc

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "ncu" / "small_train_h100.json"
SHIPPED = Path(__file__).resolve().parents[3] / "snapshots" / "tiny-cpu-train-torch-profile.json"


def test_why_table_plain_and_json():
    out = pc("kernels", str(FIXTURE), "--why")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "# small ctx256 b4 bf16 train ncu: why the kernels take their time (Nsight Compute)"
    header = lines[1].split("\t")
    assert header[:6] == ["gain (ms/step)", "time (ms/step)", "step (%)", "compute (%)", "memory (%)", "bound"]
    rows = [ln.split("\t") for ln in lines[2:] if ln and not ln.startswith("#")]
    assert len(rows) == 17
    gemm = next(r for r in rows if r[-1] == "nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN")
    assert gemm[3:9] == ["42.7", "76.6", "memory", "410.9", "52.4", "1005"]
    assert gemm[13:15] == ["TheoreticalOccupancy", "81.2"]
    assert [float(r[0]) for r in rows] == sorted((float(r[0]) for r in rows), reverse=True)
    caption = [ln for ln in lines if ln.startswith("# ")]
    assert any("tensor pipes' op counters" in ln for ln in caption)
    assert any("bf16 783.5" in ln and "3,010 GB/s" in ln for ln in caption)
    assert any("replays each kernel" in ln for ln in caption)
    assert "# Roofline (log-log; the run's measured peaks as roofs):" in lines  # the picture is caption: "# " lines
    assert any(ln.startswith("#   #8 o 408.84 FLOP/byte, 410.92 TFLOP/s bf16") for ln in lines)
    doc = json.loads(pc("kernels", str(FIXTURE), "--why", "--json").stdout)
    assert len(doc["kernels"]) == 17 and doc["kernels"][0]["gain_ms"] == max(k["gain_ms"] for k in doc["kernels"])


def test_kernels_by_time_and_what_a_run_without_ncu_says():
    out = pc("kernels", str(FIXTURE))
    assert out.returncode == 0, out.stderr
    assert "kernels by time (top 20 of 56)" in out.stdout and "--why" in out.stdout
    out = pc("kernels", str(SHIPPED), "--why")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "no Nsight Compute tables (run it with --profile ncu" in out.stderr
    out = pc("kernels", str(FIXTURE.with_name("missing.json")), "--why")
    assert out.returncode == 2 and "Traceback" not in out.stderr

"""Profile sections of run reports, on a real torch-profiled run and on real nsys fixtures."""
import json
import pathlib
import subprocess
import sys

from perfconsole.core import store
from perfconsole.core.reports.export import export

ROOT = pathlib.Path(__file__).resolve().parents[3]
PC = [sys.executable, "-m", "perfconsole.tui.main"]


def test_profiled_run_report_answers_the_hand_written_questions():
    record = store.load(ROOT / "snapshots" / "tiny-cpu-train-torch-profile.json")
    md = export(record, "md")
    assert "## Profile (the PyTorch profiler)" in md
    assert "| category | total (ms) | share |" in md and "| matmul |" in md
    assert "| forward |" in md and "| optimizer_step |" in md  # per-phase shares
    assert "Top kernels:" in md and "| 1 | `" in md
    assert "softmax takes" in md and "of the time of the two attention matmuls" in md
    # The profiler's forward range against the run's own timing, as a signed difference.
    line = next(ln for ln in md.splitlines() if "the profiler's forward range is" in ln)
    assert "ms per step against" in line and "%)" in line


def test_import_report_describes_no_model(tmp_path):
    snap = tmp_path / "imp.json"
    out = subprocess.run([*PC, "import", str(ROOT / "tests" / "fixtures" / "nsys" / "gpa"), "--save", str(snap)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    md = subprocess.run([*PC, "export", str(snap), "-f", "md"], capture_output=True, text=True, timeout=60).stdout
    assert "imported profile, no timings" in md and "| category | total (ms) | share |" in md
    assert "d_model" not in md and "ctx" not in md and "avg_ms" not in md
    doc = json.loads(subprocess.run([*PC, "export", str(snap), "-f", "json"], capture_output=True, text=True,
                                    timeout=60).stdout)
    assert doc["spec"] is None and doc["status"] == "ok" and doc["run_status"] == "imported"

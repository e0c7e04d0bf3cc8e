"""Profile sections of run reports, on a real torch-profiled run and on real nsys fixtures."""
import json
import subprocess

from perfconsole.core import store
from perfconsole.core.reports.export import export
from helpers import PC, ROOT



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
    assert "imported profile, no timed steps" in md and "| category | total (ms) | share |" in md
    assert "d_model" not in md and "ctx" not in md and "avg_ms" not in md
    doc = json.loads(subprocess.run([*PC, "export", str(snap), "-f", "json"], capture_output=True, text=True,
                                    timeout=60).stdout)
    assert doc["spec"] is None and doc["status"] == "ok" and doc["run_status"] == "imported"



def test_a_cuda_profile_holds_the_forward_range_against_the_host_s_issue_of_it():
    # On CUDA the profiled steps record the host's issue of the forward: the range (a host interval) is held
    # against it, and the forward's span on the GPU's clock is given beside it. A real H200 nsys capture.
    record = store.load(ROOT / "tests" / "fixtures" / "nsys_perfconsole" / "h200_2.7B_compiled_nsys_run.json")
    md = export(record, "md")
    line = next(ln for ln in md.splitlines() if "the profiler's forward range is" in ln)
    assert "ms timed (" in line and "the host took" not in line  # saved before the host's issue was kept
    on_gpu = record.summary.forward_ms.mean  # saved before the profiled steps' own phases were kept
    record.profile.overhead = {**record.profile.overhead, "profiled_host_forward_ms": on_gpu * 1.25}
    line = next(ln for ln in export(record, "md").splitlines() if "the profiler's forward range is" in ln)
    assert f"against {on_gpu * 1.25:.3f} ms the host took to issue the forward in the same steps" in line
    assert f"{on_gpu:.3f} ms on the GPU's clock" in line


def test_kernels_per_step_is_a_whole_number_when_it_is_one():
    from perfconsole.core.reports.profile import overhead_lines

    base = {"profiler": "torch", "profiled_ms": 12.0, "quiet_ms": 10.0, "ratio": 1.2, "profiled_steps": 4,
            "quiet_steps": 4}
    text = " ".join(overhead_lines({**base, "kernels_per_step": 2237.0, "quiet_kernels_per_step": 2237.0}))
    assert "; 2,237 kernels per profiled step against 2,237 quiet." in text, text     # was "2,237.0"
    text = " ".join(overhead_lines({**base, "kernels_per_step": 2236.5, "quiet_kernels_per_step": None}))
    assert "; 2,236.5 kernels per profiled step on average (the quiet count is not known)." in text, text

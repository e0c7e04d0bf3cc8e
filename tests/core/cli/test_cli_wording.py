"""What `perfconsole run` says on the CPU with the tiny model: an unsupported spec in one line with its
brackets kept and nothing on stdout, a custom size that names the flags it lacks, and progress that reads."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)

PC = [sys.executable, "-m", "perfconsole.core.cli.main"]
TINY = ["--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "1"]


def pc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PC, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("flags, reasons", [
    (["--fp8"], ("perfconsole: error: fp8: fp8 matmuls need device cuda",)),
    (["--kernels", "liger"], ("perfconsole: error: kernels: liger-kernel's Triton kernels need device cuda",)),
])
def test_an_unsupported_run_says_why_in_one_line_and_prints_no_table(flags, reasons):
    out = pc("run", *TINY, "--steps", "2", *flags)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""                                  # no table header with no rows under it
    assert out.stderr.strip() in reasons, out.stderr         # one line, "unsupported" once, [fast] intact


def test_a_model_the_worker_cannot_build_is_refused_in_one_line_with_nothing_on_stdout():
    factory = Path(__file__).parents[3] / "docs" / "examples" / "student_model.py"
    out = pc("run", "--model", f"{factory}:nothere", "--device", "cpu", "--ctx", "16", "--batch", "1", "--steps", "1",
             "--warmup", "0")
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""                                  # no table header with no rows under it
    assert out.stderr.splitlines()[-1] == (f"perfconsole: error: model: {factory} has no function 'nothere' "
                                           "(it defines Block, StudentGPT, build)")


def test_a_missing_baseline_is_named_once(tmp_path):
    missing = tmp_path / "nofile.json"
    out = pc("run", *TINY, "--mode", "train", "--nproc", "2", "--baseline", str(missing))
    assert out.returncode == 2
    assert out.stderr.strip() == f"perfconsole: error: {missing}: no such file or directory"


def test_size_custom_names_the_flags_it_lacks():
    out = pc("run", "--size", "custom", "--device", "cpu", "--d-model", "64")
    assert out.returncode == 2
    assert out.stderr.strip() == ("perfconsole: error: size: custom needs --d-model --d-ff --n-layers --n-heads; "
                                  "missing --d-ff --n-layers --n-heads")


def test_progress_reads_as_sentences():
    out = pc("run", *TINY, "--mode", "fwd", "--warmup", "1", "--steps", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "building: tiny d_model=64 d_ff=256 layers=2 heads=4" in lines
    assert "warmup: 1 step" in lines and "measuring: 2 steps" in lines
    # The test's data folder holds the session's measured peaks: a cached figure is said nowhere (the line a
    # measurement says is tested in tests/core/measure/test_peaks_fast_paths.py, on an empty folder).
    assert not [line for line in lines if line.startswith("peaks:")]


@pytest.mark.parametrize("command", [["export", "{f}"], ["kernels", "{f}"], ["import", "{f}"],
                                     ["ladder", "--resume", "{f}", *TINY]])
def test_a_missing_file_is_said_one_way_by_every_command(tmp_path, command):
    # export and kernels said "No such file or directory", import "no such file or directory"
    missing = tmp_path / "gone.json"
    out = pc(*(a.format(f=missing) for a in command))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == f"perfconsole: error: {missing}: no such file or directory"


def test_version_prints_the_package_version():
    import tomllib

    declared = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"]["version"]
    out = pc("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"perfconsole {declared}\n" and out.stderr == ""

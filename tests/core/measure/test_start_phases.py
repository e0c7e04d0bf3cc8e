"""Where a run's first seconds go: the real worker's start phases, through the CLI, in the saved record."""
from __future__ import annotations

import time

import pytest
import torch

from perfconsole.core import paths, store
from perfconsole.core.reports.run import markdown, run_document
from helpers import pc

pytestmark = pytest.mark.e2e   # every test here starts the CLI and its worker (tests/tiers.py)

TINY = ["--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "2", "--steps", "2"]


def timed_run(tmp_path, *extra: str):
    tmp_path.mkdir(exist_ok=True)
    save = tmp_path / "run.json"
    began = time.monotonic()
    out = pc("run", *TINY, *extra, "--save", str(save), timeout=300)
    wall = time.monotonic() - began
    assert out.returncode == 0, out.stderr
    return store.load(save), out, wall


def test_a_cpu_run_records_its_start_phases_within_the_wall_time(tmp_path):
    record, out, wall = timed_run(tmp_path)
    phases = record.start
    assert list(phases) == ["imports", "build", "flops", "first step", "rest of warm-up"]
    assert all(s >= 0 for s in phases.values())
    assert phases["imports"] > 0   # from the process's start (here its fork from a warm process) to its first event
    assert sum(phases.values()) <= wall
    line = [x for x in out.stderr.splitlines() if x.startswith("start: ")]
    assert line == ["start: " + " · ".join(f"{k} {v:.1f} s" for k, v in phases.items())]
    assert run_document(record)["start"] == phases
    assert line[0] in markdown(record)


def test_a_compiled_run_shows_its_compile_and_a_rerun_loads_it_from_the_data_folders_cache(tmp_path):
    first, out, wall = timed_run(tmp_path, "--compile")
    phases = first.start
    assert list(phases)[:4] == ["imports", "build", "flops", "compile"]
    assert all(s >= 0 for s in phases.values()) and sum(phases.values()) <= wall
    # inductor compiles C++ here: seconds, against a tiny step's milliseconds
    assert phases["compile"] > 0.5 and phases["compile"] > phases["first step"]
    assert first.compile_cache == "miss" and " · compile " in out.stderr and "(cache miss)" in out.stderr
    torch_folders = list((paths.data_dir() / "compile-cache").iterdir())
    assert [f.name for f in torch_folders] == [f"torch-{paths.safe_name(torch.__version__)}"]

    again, out, _ = timed_run(tmp_path / "again", "--compile")   # the same data folder
    assert again.compile_cache == "hit" and "(cache hit)" in out.stderr
    assert run_document(again)["compile_cache"] == "hit"
    plain, _, _ = timed_run(tmp_path / "plain")
    assert plain.compile_cache is None and "compile" not in plain.start

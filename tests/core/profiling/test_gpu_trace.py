"""cuda_gpu_trace: one row per launch, copy and memset, read by both CSV engines, and the kernel and
memory summaries summed from it. No fixture holds this report (FORMATS.md): the file is made by
scripts/bench_data.py in the layout nsys 2024-2026 prints (its header; empty launch columns on copies)."""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.profiling import csv_frames, stats_file
from perfconsole.core.profiling.columns import normalise_memop
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.settings import RunSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import bench_data  # noqa: E402


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bench_data.gpu_trace_csv(tmp_path_factory.mktemp("trace") / "run_cuda_gpu_trace.csv", 3000, seed=3)


def _load(path: Path, engine: str, blocks: bool, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(csv_frames, "ENGINE", engine)
    monkeypatch.setattr(stats_file, "FAST_MIN_BYTES", 0 if blocks else 10**15)
    return load_profile(path)


def test_every_way_of_reading_it_agrees(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got = [{k: list(v) for k, v in _load(trace, e, b, monkeypatch)[0].items()}
           for e in csv_frames.ENGINES for b in (False, True)]
    assert all(g == got[0] for g in got[1:])
    rows = got[0]["cuda_gpu_trace"]
    assert len(rows) == 3000 and set(got[0]) == {"cuda_gpu_trace", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum"}
    copy = next(r for r in rows if r["name"].startswith("[CUDA mem"))
    kernel = next(r for r in rows if not r["name"].startswith("[CUDA mem"))
    assert copy["grid_x"] is None and copy["bytes_mb"] > 0 and isinstance(copy["duration_ns"], int)
    assert isinstance(kernel["grid_x"], int) and kernel["bytes_mb"] is None and kernel["green_context"] is None


def test_the_summaries_are_nsys_s_over_the_launches(trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables, warnings = _load(trace, csv_frames.ENGINES[0], False, monkeypatch)
    assert warnings == []
    by = defaultdict(list)
    ops = defaultdict(list)
    for r in tables["cuda_gpu_trace"]:
        (ops[normalise_memop(r["name"])] if r["grid_x"] is None else by[r["name"]]).append(r["duration_ns"])
    for table, groups, count, label in ((tables["cuda_gpu_kern_sum"], by, "instances", "name"),
                                        (tables["cuda_gpu_mem_time_sum"], ops, "count", "operation")):
        assert len(table) == len(groups)
        totals = [r["total_time_ns"] for r in table]
        assert totals == sorted(totals, reverse=True)
        assert [r["time_pct"] for r in table] == [round(100 * t / sum(totals), 1) for t in totals]
        for r in table:
            v = groups[r[label]]
            assert (r["total_time_ns"], r[count], r["min_ns"], r["max_ns"]) == (sum(v), len(v), min(v), max(v))
            assert r["avg_ns"] == round(sum(v) / len(v)) and r["med_ns"] == round(statistics.median(v))
            assert abs(r["stddev_ns"] - (statistics.stdev(v) if len(v) > 1 else 0)) <= 1


def test_a_snapshot_keeps_the_trace_and_json_says_null(trace: Path, tmp_path: Path) -> None:
    tables, warnings = load_profile(trace)
    record = RunRecord(RunSpec(), name="t", status="imported", profile=Profile("import", [], tables, warnings))
    text = store.dumps(record)
    assert '"grid_x": null' in text and "NaN" not in text
    assert store.loads(text).profile.tables == {k: list(v) for k, v in tables.items()}
    json.loads(text)


def test_a_bad_trace_row_is_a_warning_with_the_file_and_line(trace: Path, tmp_path: Path) -> None:
    lines = trace.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad_cuda_gpu_trace.csv"
    bad.write_text("".join(lines[:5] + ["1,2,x\n"] + lines[5:]))
    with pytest.raises(Exception, match=r"bad_cuda_gpu_trace\.csv:1: cuda_gpu_trace: cannot read the table"):
        load_profile(bad)

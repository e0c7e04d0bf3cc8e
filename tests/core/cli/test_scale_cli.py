"""`perfconsole scale` end to end on the CPU: the one process and real gloo jobs of 2 and 4 processes (torchrun)
of the tiny model, weak and strong, saved after every count and exported as Markdown."""
from __future__ import annotations

import pytest

from perfconsole.core import store
from perfconsole.core.grids.scale import ScaleRecord
from tests.helpers import pc

pytestmark = pytest.mark.e2e

TINY = ["--size", "tiny", "--device", "cpu", "--ctx", "32", "--warmup", "1", "--steps", "2"]


def _medians(curve: ScaleRecord) -> list[float]:
    return [r.summary.total_ms.median for r in curve.runs]


def test_a_weak_curve_runs_one_two_and_four_processes(tmp_path):
    save = tmp_path / "f.json"
    done = pc("scale", *TINY, "--batch", "2", "--nproc", "1,2,4", "--save", str(save))
    assert done.returncode == 0, done.stderr[-2000:]
    curve = store.load(save)
    assert isinstance(curve, ScaleRecord) and curve.status == "ok"
    assert [r.status for r in curve.runs] == ["ok", "ok", "ok"]
    assert [r.summary.world_size for r in curve.runs] == [1, 2, 4]
    assert [len(r.ranks) for r in curve.runs] == [0, 2, 4]            # every rank's steps: real processes
    assert [r.spec.batch for r in curve.runs] == [2, 2, 2] and curve.runs[0].spec.parallel == "none"
    t1, t2, t4 = _medians(curve)
    exported = pc("export", str(save), "--format", "md")
    assert exported.returncode == 0, exported.stderr
    md = exported.stdout
    assert f"| 2 | 2 | ok | {t2:,.2f} |" in md and f"{t1 / t2:.1%}" in md and f"{t1 / t4:.1%}" in md
    assert "weak scaling" in md and "```" in md and "4 processes  " in md.split("```")[1]
    assert f"weak scaling {t1 / t4:.1%}" in done.stdout      # the table's caption: its bars


def test_a_strong_curve_splits_the_batch_and_adds_the_one_process_run(tmp_path):
    save = tmp_path / "strong.json"
    done = pc("scale", *TINY, "--batch", "4", "--nproc", "2,4", "--strong", "--save", str(save))
    assert done.returncode == 0, done.stderr[-2000:]
    curve = store.load(save)
    assert [r.spec.nproc for r in curve.runs] == [1, 2, 4] and curve.spec.added_one
    assert [r.spec.batch for r in curve.runs] == [4, 2, 1]
    t1, t2, t4 = _medians(curve)
    md = pc("export", str(save), "--format", "md").stdout
    assert "strong scaling" in md and "| 1 (added) | 4 | ok |" in md
    assert f"{t1 / (2 * t2):.1%}" in md and f"{t1 / (4 * t4):.1%}" in md

"""A setting declared as an axis (core.settings) is a sweep axis with no code of its own: `--checkpoint none,blocks`
multiplies the cells, keeps them apart in every table and finding, and comes back from a saved sweep."""
from __future__ import annotations

import json
import subprocess
import sys

from perfconsole.core.grids.sweep import SweepRecord, SweepSpec
from perfconsole.core.reports.sweep import grid_tables, markdown
from perfconsole.core.settings import RunSpec, axes

BASE = RunSpec(size="tiny", batch=1, steps=2, warmup=1, device="cpu")
SPEC = SweepSpec(BASE, ("tiny",), (16, 32), ("fp32",), ("train",), (1,), (("checkpoint", ("none", "blocks")),))


def test_every_declared_axis_reaches_the_sweep():
    assert axes() == {"size": "sizes", "ctx": "ctxs", "precision": "precisions", "mode": "modes", "warmup": "warmups",
                      "checkpoint": "checkpoints"}


def test_an_extra_axis_multiplies_the_cells_and_names_its_columns():
    cells = SPEC.validate().cells()
    assert [(c.checkpoint, c.ctx) for c in cells] == [("none", 16), ("none", 32), ("blocks", 16), ("blocks", 32)]
    assert SPEC.columns() == [("fp32", "train", ("none",)), ("fp32", "train", ("blocks",))]
    assert SweepSpec.from_dict(json.loads(json.dumps(SPEC.to_dict()))) == SPEC
    record = SweepRecord.new(SPEC)
    assert record.name.endswith("fp32 train checkpoint none,blocks")
    titles = [t.title for t in grid_tables(record)]
    assert titles == ["train · fp32 checkpoint none", "train · fp32 checkpoint blocks"]   # apart, not merged
    md = markdown(record)
    assert "## train · fp32 checkpoint none" in md and "## train · fp32 checkpoint blocks" in md


def test_the_cli_sweeps_an_extra_axis():
    out = subprocess.run([sys.executable, "-m", "perfconsole.core.cli.main", "sweep", "--sizes", "tiny", "--device",
                          "cpu", "--ctx", "16", "--batch", "1", "--mode", "train", "--warmup", "1", "--steps", "2",
                          "--checkpoint", "none,blocks", "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["data"]["runs"]
    assert [(r["spec"]["checkpoint"], r["status"]) for r in runs] == [("none", "ok"), ("blocks", "ok")]
    assert [round(s["loss"], 4) for s in runs[0]["steps"]] == [round(s["loss"], 4) for s in runs[1]["steps"]]

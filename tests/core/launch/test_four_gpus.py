"""Four GPUs of one host (NCCL): the scaling curve at 1, 2 and 4 processes, and the refusal of a count the machine
does not have. Run on a four-GPU kind with `pytest -m gpu` (scripts/gpu_suite_split.sh runs it on all four)."""
from __future__ import annotations

import pytest

from perfconsole.core import store
from perfconsole.core.grids.scale import ScaleRecord
from perfconsole.core.telemetry.nvml import visible_gpus
from tests.helpers import pc

pytestmark = [pytest.mark.gpu, pytest.mark.four_gpus, pytest.mark.e2e,
              pytest.mark.skipif(len(visible_gpus()) < 4, reason="needs four GPUs")]

SMALL = ["--size", "small", "--ctx", "256", "--batch", "4", "--precision", "bf16", "--mode", "train",
         "--attention", "sdpa", "--warmup", "2", "--steps", "5", "--device", "cuda"]


def test_the_weak_curve_runs_one_two_and_four_gpus_and_prices_each_count_s_communication(tmp_path):
    save = tmp_path / "curve.json"
    done = pc("scale", *SMALL, "--nproc", "1,2,4", "--save", str(save))
    assert done.returncode == 0, done.stderr[-2000:]
    curve = store.load(save)
    assert isinstance(curve, ScaleRecord) and [r.status for r in curve.runs] == ["ok", "ok", "ok"]
    assert [r.summary.world_size for r in curve.runs] == [1, 2, 4] and [len(r.ranks) for r in curve.runs] == [0, 2, 4]
    one, two, four = (r.summary for r in curve.runs)
    assert one.exposed_comm_ms is None
    for job in (two, four):  # DDP: a step without the all-reduce, the exposed rest, NCCL's link measured
        assert job.comm_free_ms is not None and job.exposed_comm_ms is not None
    assert all(r.collectives["link_busbw_gbps"] > 10 for r in curve.runs[1:])
    assert four.tokens_per_s > two.tokens_per_s > one.tokens_per_s * 0.5  # four ranks carry four batches
    md = pc("export", str(save), "--format", "md").stdout
    assert f"{one.total_ms.median / four.total_ms.median:.1%}" in md and "4 processes  " in md


def test_a_count_beyond_the_gpus_is_refused_before_any_process(tmp_path):
    n = len(visible_gpus()) + 1
    done = pc("scale", *SMALL, "--nproc", f"1,{n}", "--save", str(tmp_path / "no.json"))
    assert done.returncode == 2 and not (tmp_path / "no.json").exists()
    assert f"{n} processes need {n} GPUs" in done.stderr, done.stderr

"""A run's weights and data come from its seed alone, not from what else the process did first."""
from __future__ import annotations

import pytest

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)

SPEC = RunSpec(size="tiny", ctx=16, batch=2, device="cpu", precision="fp32", mode="train", warmup=1, steps=2)


def _losses(spec: RunSpec) -> list[float]:
    record = RunRecord(spec)
    for event in Launch(spec).events():
        record.apply(event)
    assert record.status == "ok", record.error
    return [s.loss for s in [*record.warmup_steps, *record.steps]]


@pytest.mark.fresh_data_dir
def test_the_run_that_measures_the_peaks_trains_the_same_model_as_the_next():
    # The first run finds no peaks in its data folder and measures them (random matrices); the second reads
    # them. Seeded before the measurement, the first run's loss was 9.2026 against 9.2421, and a ladder whose
    # first rung measured the peaks called every later rung's numerics DIFFERS (4.3e-3).
    measuring = _losses(SPEC)
    cached = _losses(SPEC)
    assert measuring == cached
    assert _losses(SPEC.with_(seed=1)) != cached   # and the seed does decide them

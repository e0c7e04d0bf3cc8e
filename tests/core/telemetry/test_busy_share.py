"""The GPU busy share of a run without a profiler: NVML's utilisation over the measured steps (recorded on an
H200, as the run record holds it) is chosen over the events' lower bound, and every report names its source."""
from __future__ import annotations

import json
import pathlib
import statistics

import pytest

from perfconsole.core import events as ev
from perfconsole.core.cli.run import summary_table
from perfconsole.core.record import RunRecord
from perfconsole.core.reports import export
from perfconsole.core.spec import RunSpec
from perfconsole.core.summary import compute_summary

RECORDED = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "telemetry" / "h200_recorded_2.7B_train.json"
# The spec the telemetry was recorded under (its "source" line), without the nsys profile.
SPEC = RunSpec(size="2.7B", ctx=512, batch=4, precision="bf16", mode="train", warmup=3, steps=8, device="cuda")


def _steps() -> list[ev.Step]:
    # Host-bound issue times close to the GPU span: the events' bound is ~6%, as on the H200 for steps whose
    # kernels ran 65-75% of the time.
    return [ev.Step(index=3 + i, warmup=False, total_ms=182.0 + i, forward_ms=60.0, backward_ms=110.0,
                    optimizer_ms=12.0 + i, loss=9.2, host_ms=171.0 + i) for i in range(8)]


def _record(telemetry: dict | None, profile_busy: float | None = None) -> RunRecord:
    r = RunRecord(SPEC)
    r.apply(ev.RunStarted(spec=SPEC.to_dict(), environment={"gpu_name": "NVIDIA H200", "device": "cuda"}, pid=1))
    steps = _steps()
    for s in steps:
        r.apply(s)
    if telemetry is not None:  # the launcher yields it before the worker's summary (core/launch/telemetry.py)
        r.apply(ev.Telemetry(telemetry))
    summary = compute_summary(SPEC, steps, [], "NVIDIA H200", profile_busy=profile_busy)
    r.apply(ev.SummaryReady(summary.to_dict()))
    r.apply(ev.Finished("ok"))
    return r


@pytest.fixture
def recorded() -> dict:
    return json.loads(RECORDED.read_text())["telemetry"]


def test_nvml_utilisation_is_the_busy_share_without_a_profiler(recorded):
    r = _record(recorded)
    sm = r.summary
    util = [v for v in recorded["series"]["gpu_util_pct"] if v is not None]
    assert sm.gpu_busy_source == "nvml"
    assert sm.gpu_busy_share == pytest.approx(statistics.fmean(util) / 100)     # 91% on this H200 run
    assert sm.bound == "gpu-bound"
    events_only = _record(None).summary
    assert events_only.gpu_busy_source == "events" and events_only.gpu_busy_share < 0.1   # the loose bound it replaces
    profiled = _record(recorded, profile_busy=0.72).summary
    assert (profiled.gpu_busy_source, profiled.gpu_busy_share) == ("profile", 0.72)      # a measurement stays


def test_every_report_names_the_source(recorded):
    r = _record(recorded)
    assert "GPU busy 91% of the step (nvml: NVML's utilisation over the measured steps): gpu-bound" in \
        summary_table(r).caption
    assert "GPU busy 91% of the step (nvml: " in export.export(r, "md")
    lower = _record(None)
    assert "GPU busy at least 6% of the step (events: CUDA events: a lower bound" in summary_table(lower).caption


def test_a_snapshot_saved_with_the_events_figure_and_telemetry_opens_with_nvml(recorded):
    old = _record(None).to_dict()
    old["telemetry"] = recorded        # as saved before NVML's figure was used: source "events" in the summary
    assert old["summary"]["gpu_busy_source"] == "events"
    loaded = RunRecord.from_dict(old)
    assert loaded.summary.gpu_busy_source == "nvml" and loaded.summary.gpu_busy_share > 0.9

"""The GPU busy share of a run without a profiler: NVML's utilisation over the measured steps (recorded on an
H200, as the run record holds it) is chosen over the events' lower bound, and every report names its source.
Samples from the steps' first second are left out: NVML averages each over up to a second before it."""
from __future__ import annotations

import dataclasses
import json
import statistics

import pytest

from perfconsole.core import events as ev
from perfconsole.core.cli.run import summary_table
from perfconsole.core.record import RunRecord
from perfconsole.core.reports import export
from perfconsole.core.settings import RunSpec
from perfconsole.core.run_summary import compute_summary
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "telemetry"
RECORDED = FIXTURES / "h200_recorded_2.7B_train.json"
SHORT = FIXTURES / "h200_recorded_llama1B_fp8_5steps.json"  # 0.6 s of GPU-bound steps after a compile
# The spec the telemetry was recorded under (its "source" line), without the nsys profile.
SPEC = RunSpec(size="2.7B", ctx=512, batch=4, precision="bf16", mode="train", warmup=3, steps=8, device="cuda")


def _steps() -> list[ev.Step]:
    # Host-bound issue times close to the GPU span: the events' bound is ~6%, as on the H200 for steps whose
    # kernels ran 65-75% of the time.
    return [ev.Step(index=3 + i, warmup=False, total_ms=182.0 + i, forward_ms=60.0, backward_ms=110.0,
                    optimizer_ms=12.0 + i, loss=9.2, host_ms=171.0 + i) for i in range(8)]


def _record(telemetry: dict | None, profile_busy: float | None = None, steps: list[ev.Step] | None = None,
            spec: RunSpec = SPEC) -> RunRecord:
    r = RunRecord(spec)
    r.apply(ev.RunStarted(spec=spec.to_dict(), environment={"gpu_name": "NVIDIA H200", "device": "cuda"}, pid=1))
    steps = steps or _steps()
    for s in steps:
        r.apply(s)
    if telemetry is not None:  # the launcher yields it before the worker's summary (core/launch/telemetry.py)
        r.apply(ev.Telemetry(telemetry))
    summary = compute_summary(spec, steps, [], "NVIDIA H200", profile_busy=profile_busy)
    r.apply(ev.SummaryReady(summary.to_dict()))
    r.apply(ev.Finished("ok"))
    return r


@pytest.fixture
def recorded() -> dict:
    return json.loads(RECORDED.read_text())["telemetry"]


def test_nvml_utilisation_is_the_busy_share_without_a_profiler(recorded):
    r = _record(recorded)
    sm = r.summary
    series = recorded["series"]
    util = [v for t, v in zip(series["t_s"], series["gpu_util_pct"]) if v is not None and t >= 1.0]
    assert len(util) == 6 and len(series["t_s"]) == 16                        # 1.6 s of steps
    assert sm.gpu_busy_source == "nvml"
    assert sm.gpu_busy_share == pytest.approx(statistics.fmean(util) / 100)     # 85% on this H200 run
    assert sm.bound == "gpu-bound"
    events_only = _record(None).summary
    assert events_only.gpu_busy_source == "events" and events_only.gpu_busy_share < 0.1   # the loose bound it replaces
    profiled = _record(recorded, profile_busy=0.72).summary
    assert (profiled.gpu_busy_source, profiled.gpu_busy_share) == ("profile", 0.72)      # a measurement stays


def test_every_report_names_the_source(recorded):
    r = _record(recorded)
    assert "GPU busy 85% of the step (nvml: NVML's utilisation over the measured steps, from 1 s in): gpu-bound" \
        in summary_table(r).caption
    assert "GPU busy 85% of the step (nvml: " in export.export(r, "md")
    lower = _record(None)
    assert "GPU busy at least 6% of the step (events: CUDA events: a lower bound" in summary_table(lower).caption


def test_a_snapshot_saved_with_the_events_figure_and_telemetry_opens_with_nvml(recorded):
    old = _record(None).to_dict()
    old["telemetry"] = recorded        # as saved before NVML's figure was used: source "events" in the summary
    assert old["summary"]["gpu_busy_source"] == "events"
    loaded = RunRecord.from_dict(old)
    assert loaded.summary.gpu_busy_source == "nvml" and loaded.summary.gpu_busy_share > 0.8


def test_steps_shorter_than_nvml_s_window_get_no_nvml_figure():
    """A 5-step ladder rung on an H200 (0.6 s): NVML's first samples still averaged the idle GPU of the compile
    before (5 %), so the mean of all samples (50 %) called these GPU-bound steps host-bound."""
    fixture = json.loads(SHORT.read_text())
    short = fixture["telemetry"]
    util = short["series"]["gpu_util_pct"]
    assert util[:3] == [5.0, 5.0, 5.0] and min(util[3:]) >= 94 and max(short["series"]["t_s"]) < 1.0
    spec = RunSpec(model="hf:llama", size="1B", ctx=2048, batch=4, precision="bf16", mode="train", warmup=2,
                   steps=5, device="cuda", compile=True, compile_mode="reduce-overhead", optimizer="fused",
                   weights="bf16", kernels="liger", fp8=True)
    names = {f.name for f in dataclasses.fields(ev.Step)}
    steps = [ev.Step(**{k: v for k, v in s.items() if k in names}) for s in fixture["steps"]]
    record = _record(short, steps=steps, spec=spec)
    sm = record.summary
    # The events' bound stays: the host issued these steps in under half their time, so they are GPU-bound.
    assert (sm.gpu_busy_source, sm.bound) == ("events", "gpu-bound") and sm.gpu_busy_share > 0.45
    assert RunRecord.from_dict(record.to_dict()).summary.gpu_busy_source == "events"

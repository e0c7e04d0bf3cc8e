"""Telemetry is sampled in the parent from the child's `measuring` stage to its first event after the steps."""
from __future__ import annotations

import time

from perfconsole.core import events as ev
from perfconsole.core.launch.telemetry import MeasuredStepsTelemetry, nvml_index


def test_the_recorder_spans_the_measured_steps_only():
    reads = []

    def read():
        reads.append(time.monotonic())
        return {"sm_clock_mhz": 1980.0, "power_w": 500.0, "reasons": []}

    t = MeasuredStepsTelemetry(True, {}, read=read)
    assert list(t.see(ev.Step(0, True, 1.0, 1.0))) == []        # warm-up: nothing yet
    assert list(t.see(ev.Progress("measuring", "2 steps"))) == []
    time.sleep(0.25)
    assert list(t.see(ev.Step(1, False, 1.0, 1.0))) == []
    (out,) = t.see(ev.Memory(1.0, 2.0))
    assert isinstance(out, ev.Telemetry) and out.data["samples"] == len(reads) >= 2
    assert out.data["summary"]["sm_clock_mhz"]["median"] == 1980.0
    n = len(reads)
    time.sleep(0.25)
    assert len(reads) == n and t.stop() == []                     # stopped, and only once


def test_a_jobs_measured_steps_keep_the_recorder_going():
    """A job sends every rank's steps before the job's step; the recorder used to stop at the first of them,
    so a DDP job's telemetry covered 0.1 s of its 1.45 s of steps (2.7B on 2x H100) and its GPU busy share
    fell back to the events' lower bound."""
    reads = []

    def read():
        reads.append(time.monotonic())
        return {"gpu_util_pct": 97.0, "reasons": []}

    t = MeasuredStepsTelemetry(True, {}, read=read)
    assert list(t.see(ev.Progress("measuring", "2 steps"))) == []
    for index in (3, 4):
        time.sleep(0.15)
        rank_steps = ev.RankSteps(index, False, [{"total_ms": 150.0, "rank": 0}, {"total_ms": 151.0, "rank": 1}])
        assert list(t.see(rank_steps)) == [] and list(t.see(ev.Step(index, False, 151.0, 151.0))) == []
    (out,) = t.see(ev.Progress("comm_steps", "steps with their collectives timed"))
    assert isinstance(out, ev.Telemetry) and out.data["samples"] == len(reads) >= 3


def test_off_on_the_cpu_and_when_asked():
    assert not MeasuredStepsTelemetry(False, {}).enabled
    assert not MeasuredStepsTelemetry(True, {"PERFCONSOLE_TELEMETRY": "0"}).enabled


def test_nvml_index_follows_cuda_visible_devices():
    assert nvml_index({"CUDA_VISIBLE_DEVICES": "3,1"}) == 3
    assert nvml_index({"CUDA_VISIBLE_DEVICES": "GPU-abc"}) == 0

"""GPU telemetry over a run's measured steps, sampled from this (the parent) process.

NVML reads the whole GPU, so the parent can sample it while the child measures. Sampling in the
child instead cost an xl bf16 step 11% (docs/results/telemetry_overhead_h200.md): its thread takes
the GIL from a host-bound launch loop. Here the recorder starts when the child says it is measuring
and stops at its first event after the measured steps. A data-parallel job sends each measured step as
every rank's steps (RankSteps) and then the job's step (Step): both belong to the steps.
"""
from __future__ import annotations

import os
from collections.abc import Iterator

from perfconsole.core import events as ev


def nvml_index(env: dict[str, str] | None) -> int:
    """The NVML number of the child's first visible GPU (NVML ignores CUDA_VISIBLE_DEVICES)."""
    visible = ({**os.environ, **(env or {})}.get("CUDA_VISIBLE_DEVICES") or "").split(",")
    first = visible[0].strip()
    return int(first) if first.isdigit() else 0


class MeasuredStepsTelemetry:
    def __init__(self, on_gpu: bool, env: dict[str, str] | None, read=None) -> None:
        self.read = read  # tests replay a recorded series; by default NVML is read
        self.enabled = on_gpu and ({**os.environ, **(env or {})}.get("PERFCONSOLE_TELEMETRY") != "0")
        self.env = env
        self.recorder = None
        self.measuring = False

    def see(self, event: ev.Event) -> Iterator[ev.Event]:
        """Start on the `measuring` stage; stop (and yield the telemetry) at the first event after the steps."""
        if not self.enabled:
            return
        if isinstance(event, ev.Progress) and event.stage == "measuring" and not self.measuring:
            from perfconsole.core.telemetry.recorder import TelemetryRecorder

            self.recorder = TelemetryRecorder(nvml_index(self.env), read=self.read)
            self.recorder.start()
            self.measuring = True
        elif self.measuring and not isinstance(event, (ev.Step, ev.RankSteps)):
            yield from self.stop()

    def stop(self) -> list[ev.Event]:
        recorder, self.recorder, self.measuring = self.recorder, None, False
        if recorder is None:
            return []
        recorded = recorder.stop()
        return [] if recorded is None else [ev.Telemetry(recorded.to_dict())]

"""A first run on an empty data folder measures nothing in front of its first step: on the CPU its peaks come
after the last timed step, only the figures its precision needs; the record says whether they were measured,
cached or not measured (and why); and a figure that needs them is absent, with its reason, where they are
missing, never one held against other figures."""
from __future__ import annotations

import json
import os

import pytest

from helpers import TINY, TINY_ARGS, pc, stream
from perfconsole.core import events as ev
from perfconsole.core.flops import PEAKS_FILE, peaks_text, speed_of_light
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.paths import data_dir
from perfconsole.core.record import RunRecord
from perfconsole.core.stats import summarize

pytestmark = pytest.mark.e2e

SPEC = TINY.with_(ctx=16, warmup=1, steps=2)


def _run(spec, env: dict[str, str] | None = None) -> tuple[RunRecord, list[ev.Event]]:
    seen: list[ev.Event] = []
    record = stream(Launch(spec, env=env), RunRecord(spec), seen)
    assert record.status == "ok", record.error
    return record, seen


def _first(events: list[ev.Event], kind: type, stage: str | None = None) -> int | None:
    return next((i for i, e in enumerate(events) if isinstance(e, kind)
                 and (stage is None or getattr(e, "stage", None) == stage)), None)


def _losses(record: RunRecord) -> list[float]:
    return [s.loss for s in [*record.warmup_steps, *record.steps]]


@pytest.mark.fresh_data_dir
def test_a_first_run_measures_its_peaks_after_its_last_step_and_the_next_reads_them_with_the_same_numerics():
    first, events = _run(SPEC)
    last_step = max(i for i, e in enumerate(events) if isinstance(e, ev.Step))
    said, peaks = _first(events, ev.Progress, "peaks"), _first(events, ev.Peaks)
    assert said is not None and peaks is not None and last_step < said < peaks, [type(e).__name__ for e in events]
    assert first.peaks["source"] == "measured" and peaks_text(first.peaks) == "peaks: measured"
    assert set(first.peaks["matmul_tflops"]) == {"fp32", "tf32"}     # what an fp32 run needs, no half precision
    sol = first.summary.speed_of_light
    assert sol["peaks"]["matmul_source"] == sol["peaks"]["bandwidth_source"] == "measured" and sol["total_ms"]["floor_ms"] > 0

    cached, events = _run(SPEC)
    assert _first(events, ev.Progress, "peaks") is None               # read, not measured: nothing said
    assert cached.peaks["source"] == "cached" and cached.peaks["matmul_tflops"] == first.peaks["matmul_tflops"]
    assert cached.summary.speed_of_light["peaks"]["matmul_source"] == "cached"
    assert _losses(first) == _losses(cached)                          # the same weights, data and steps

    # Another precision on the same device measures its own matmul beside the copy cached by the first.
    bf16, _ = _run(SPEC.with_(precision="bf16"))
    assert bf16.peaks["source"] == "measured" and peaks_text(bf16.peaks) == "peaks: measured (copy cached)"
    p = bf16.summary.speed_of_light["peaks"]
    assert (p["precision"], p["matmul_source"], p["bandwidth_source"]) == ("bf16", "measured", "cached")
    kept = json.loads((data_dir() / PEAKS_FILE).read_text())
    (entry,) = kept.values()
    assert set(entry["matmul_tflops"]) == {"bf16", "fp32", "tf32"}
    assert entry["matmul_tflops"]["fp32"] == first.peaks["matmul_tflops"]["fp32"]  # kept, not measured again
    assert entry["matmul_tflops"]["bf16"] >= entry["matmul_tflops"]["fp32"]


@pytest.mark.fresh_data_dir
def test_a_run_given_both_peaks_measures_none_says_so_and_holds_its_floors_against_the_given_ones():
    record, events = _run(SPEC.with_(peak_tflops=0.5, peak_gbps=20.0))
    assert _first(events, ev.Progress, "peaks") is None and not (data_dir() / PEAKS_FILE).exists()
    assert record.peaks == {"source": "not measured", "reason": "--peak-tflops and --peak-gbps were given"}
    assert peaks_text(record.peaks) == "peaks: not measured (--peak-tflops and --peak-gbps were given)"
    p = record.summary.speed_of_light["peaks"]
    assert (p["matmul_tflops"], p["matmul_source"], p["bandwidth_gbps"], p["bandwidth_source"]) == (
        0.5, "override", 20.0, "override")
    again = RunRecord.from_dict(json.loads(json.dumps(record.to_dict())))   # as saved and opened again
    assert again.peaks == record.peaks and again.recompute_summary().speed_of_light["peaks"]["matmul_tflops"] == 0.5


def test_a_floor_needs_the_runs_own_precision_and_a_record_without_peaks_shows_none():
    phases = {"total_ms": summarize([10.0, 11.0])}
    fp32_only = {"device": "cpu", "matmul_tflops": {"fp32": 1.0, "tf32": 1.0}, "bandwidth_gbps": 10.0,
                 "source": "cached"}
    assert speed_of_light(SPEC, phases, fp32_only)["total_ms"]["floor_ms"] > 0
    # A bf16 run is never held against the fp32 figure, nor a run whose peaks were not measured against any.
    assert speed_of_light(SPEC.with_(precision="bf16"), phases, fp32_only) is None
    assert speed_of_light(SPEC, phases, {"source": "not measured", "reason": "why"}) is None
    assert speed_of_light(SPEC, phases, None) is None
    assert peaks_text(None).startswith("peaks: not measured (the run ended before its summary")


@pytest.mark.fresh_data_dir
def test_a_run_that_fails_before_its_peaks_shows_no_speed_of_light_and_says_why():
    # The worker raises at its third step: the steps before it are kept, the peaks (after the last step on a
    # CPU) were never measured, and the table says so where the speed of light would be.
    env = {**os.environ, "PERFCONSOLE_FAULT": "raise:2"}
    out = pc("run", *TINY_ARGS, "--warmup", "0", "--steps", "4", "--json", env=env)
    doc = json.loads(out.stdout)["data"]
    assert doc["status"] == "error" and len(doc["steps"]) == 2 and doc["peaks"] is None
    assert doc["summary"]["speed_of_light"] is None and not (data_dir() / PEAKS_FILE).exists()
    table = pc("run", *TINY_ARGS, "--warmup", "0", "--steps", "4", env=env)
    said = " ".join(table.stdout.split())
    assert "speed of light: not shown, peaks: not measured (the run ended before its summary" in said, table.stdout

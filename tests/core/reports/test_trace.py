"""`export --format trace`: Chrome trace-event documents of real run records, checked against the
Trace Event Format (phases X, C, M; ts and dur in microseconds; X slices nested per thread)."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.reports.export import FORMATS, export
from perfconsole.core.reports.trace import document
from perfconsole.core.settings import RunSpec
from helpers import ROOT

FP32 = ROOT / "snapshots" / "tiny-cpu-train-fp32.json"
FWD = ROOT / "snapshots" / "tiny-cpu-fwd-ctx64.json"
TORCH = ROOT / "snapshots" / "tiny-cpu-train-torch-profile.json"
H200 = ROOT / "tests" / "fixtures" / "nsys_perfconsole" / "h200_2.7B_compiled_nsys_run.json"
TELEMETRY = ROOT / "tests" / "fixtures" / "telemetry" / "h200_recorded_2.7B_train.json"
META_NAMES = {"process_name", "thread_name", "thread_sort_index", "process_sort_index"}
EPS_US = 1e-6


def check_trace(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rule the viewers rely on; returns the events."""
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert doc["displayTimeUnit"] == "ms" and isinstance(doc["otherData"], dict)
    json.dumps(doc, allow_nan=False)  # no NaN or infinity anywhere
    events = doc["traceEvents"]
    named_pids = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    last_x: dict[tuple[int, int], float] = defaultdict(lambda: -math.inf)
    last_c: dict[tuple[int, str], float] = defaultdict(lambda: -math.inf)
    step = None
    for e in events:
        assert {"pid", "tid", "ph", "name", "ts"} <= set(e), e
        assert e["ph"] in ("X", "C", "M"), e
        assert isinstance(e["ts"], float) and math.isfinite(e["ts"]) and e["ts"] >= 0, e
        assert e["pid"] in named_pids, e
        if e["ph"] == "M":
            assert e["name"] in META_NAMES
            if e["name"].endswith("_name"):
                assert isinstance(e["args"]["name"], str) and e["args"]["name"]
            else:
                assert isinstance(e["args"]["sort_index"], int)
        elif e["ph"] == "X":
            key = (e["pid"], e["tid"])
            assert key in named_threads, e
            assert isinstance(e["dur"], float) and e["dur"] >= 0, e
            assert e["ts"] >= last_x[key], e             # non-decreasing per track
            last_x[key] = e["ts"]
            if e["cat"] == "step":
                step = e
            elif e["cat"] == "phase":                    # inside the step before it, same track
                assert step is not None and (step["pid"], step["tid"]) == key
                assert e["args"]["step"] == step["name"]
                assert e["ts"] >= step["ts"] - EPS_US
                assert e["ts"] + e["dur"] <= step["ts"] + step["dur"] + EPS_US
        else:
            (value,) = e["args"].values()
            assert isinstance(value, float) and math.isfinite(value), e
            assert e["ts"] >= last_c[(e["pid"], e["name"])], e
            last_c[(e["pid"], e["name"])] = e["ts"]
    return events


def trace_of(record: RunRecord) -> list[dict[str, Any]]:
    """Through the export table, as a file would hold it."""
    return check_trace(json.loads(export(record, "trace")))


def of(events: list[dict[str, Any]], cat: str, pid: int | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e.get("cat") == cat and (pid is None or e["pid"] == pid)]


def check_steps(events: list[dict[str, Any]], warmup: list[ev.Step], measured: list[ev.Step], pid: int) -> None:
    """The steps in order, warm-up first, end to end from 0, each with its measured duration and phases."""
    steps = of(events, "step", pid)
    assert len(steps) == len(warmup) + len(measured)
    assert [e["name"] for e in steps] == ([f"warm-up step {s.index}" for s in warmup]
                                          + [f"step {s.index}" for s in measured])
    t = 0.0
    for i, (e, s) in enumerate(zip(steps, [*warmup, *measured])):
        assert e["ts"] == pytest.approx(t, abs=1e-3) and e["dur"] == pytest.approx(s.total_ms * 1000, abs=1e-3)
        assert e["args"]["warmup"] is (i < len(warmup)) and e["args"]["index"] == s.index
        t = e["ts"] + e["dur"]
    phases = of(events, "phase", pid)
    want = [(p, getattr(s, f"{p}_ms")) for s in [*warmup, *measured] for p in ("forward", "backward", "optimizer")
            if getattr(s, f"{p}_ms") is not None]
    assert [(e["name"], e["args"]["ms"]) for e in phases] == want
    for e in phases:
        assert e["dur"] == pytest.approx(e["args"]["ms"] * 1000, abs=2e-3)


def test_formats_name_trace_and_other_kinds_say_what_they_export():
    assert FORMATS == ("md", "csv", "json", "trace", "svg")
    sweep = store.load(ROOT / "snapshots" / "tiny-cpu-sweep.json")
    with pytest.raises(ValueError, match=r"^format: sweep snapshots export as md, csv, json, not 'trace'$"):
        export(sweep, "trace")
    with pytest.raises(ValueError, match="format: must be one of md, csv, json, trace, svg, not 'xlsx'"):
        export(store.load(FP32), "xlsx")


def test_a_cpu_train_run_has_named_tracks_and_its_steps_end_to_end():
    record = store.load(FP32)
    events = trace_of(record)
    assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {f"run: {record.name} (ok)"}
    assert [e["args"]["name"] for e in events if e["name"] == "thread_name"] == [
        "steps (laid end to end from 0; not clock times)"]
    check_steps(events, record.warmup_steps, record.steps, pid=1)
    assert len(of(events, "step")) == 2 + 8 and len(of(events, "phase")) == 3 * 10
    assert not [e for e in events if e["ph"] == "C"]
    other = json.loads(export(record, "trace"))["otherData"]
    assert "laid end to end from 0" in other["step_layout"] and "warm-up first" in other["step_layout"]
    assert other["warmup_steps"] == 2 and other["measured_steps"] == 8 and "profile" not in other


def test_a_forward_only_run_has_only_forward_phases():
    record = store.load(FWD)
    events = trace_of(record)
    check_steps(events, record.warmup_steps, record.steps, pid=1)
    assert {e["name"] for e in of(events, "phase")} == {"forward"}


def test_the_h200_nsys_run_keeps_phases_inside_steps_and_names_the_nsys_report():
    record = store.load(H200)
    doc = json.loads(export(record, "trace"))
    events = check_trace(doc)
    check_steps(events, record.warmup_steps, record.steps, pid=1)
    assert len(of(events, "step")) == 3 + 8
    assert not [e for e in of(events, "phase") if e["args"].get("clipped_to_step_end")]
    # The last phase of each step closes exactly at the step's end: the phases add up to the total.
    steps, phases = of(events, "step"), of(events, "phase")
    for s, last in zip(steps, phases[2::3]):
        assert last["ts"] + last["dur"] == pytest.approx(s["ts"] + s["dur"], abs=1e-3)
    profile = doc["otherData"]["profile"]
    assert profile["profiler"] == "nsys" and profile["timeline_files"] == ["/root/out/c27_nsys/profile.nsys-rep"]
    nvtx = of(events, "nvtx_summary")
    rows = record.profile.tables["nvtx_sum"]
    assert [e["name"] for e in nvtx] == [r["range"] for r in rows]
    assert [e["dur"] for e in nvtx] == pytest.approx([r["total_time_ns"] / 1000 for r in rows])
    assert all("not a timeline" in e["args"]["summary"] for e in nvtx)
    assert nvtx[0]["pid"] != 1 and "not a timeline" in next(
        e["args"]["name"] for e in events if e["name"] == "process_name" and e["pid"] == nvtx[0]["pid"])


def test_a_torch_profile_gives_an_nvtx_summary_and_names_the_chrome_trace_without_copying_it():
    record = store.load(TORCH)
    events = trace_of(record)
    assert [e["name"] for e in of(events, "nvtx_summary")] == [r["range"] for r in record.profile.tables["nvtx_sum"]]
    # The shipped snapshot kept no files; a run on a machine with its trace names torch_trace.json.
    record.profile = Profile("torch", ["/runs/x/torch_trace.json"], record.profile.tables)
    text = export(record, "trace")
    doc = json.loads(text)
    check_trace(doc)
    assert doc["otherData"]["profile"]["timeline_files"] == ["/runs/x/torch_trace.json"]
    assert '"ph": "B"' not in text and len(doc["traceEvents"]) == len(events)


def test_telemetry_becomes_one_counter_track_per_field_with_its_unit():
    record = store.load(H200)
    telemetry = json.loads(TELEMETRY.read_text())["telemetry"]
    telemetry["series"]["power_w"][3] = None                     # a sample the card did not report
    record.telemetry = telemetry
    events = trace_of(record)
    counters = [e for e in events if e["ph"] == "C"]
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in counters:
        by_name[e["name"]].append(e)
    assert {"SM clock (MHz)", "power draw (W)", "GPU temperature (°C)", "memory used (MiB)",
            "GPU utilisation (%)"} <= set(by_name)
    series = telemetry["series"]
    warmup_us = sum(s.total_ms for s in record.warmup_steps) * 1000
    assert len(by_name["power draw (W)"]) == len(series["t_s"]) - 1
    sm = by_name["SM clock (MHz)"]
    assert [e["args"]["value"] for e in sm] == series["sm_clock_mhz"]
    assert [e["ts"] for e in sm] == pytest.approx([warmup_us + t * 1e6 for t in series["t_s"]], abs=1e-3)
    assert len({e["pid"] for e in counters}) == 1 and counters[0]["pid"] != 1
    other = json.loads(export(record, "trace"))["otherData"]
    assert other["telemetry"].startswith(f"{len(series['t_s'])} NVML samples")


def replicated_record() -> RunRecord:
    """Three processes folded from events, as RepeatedLaunch sends them."""
    spec = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=3, mode="train", repeat=3)
    record = RunRecord(spec)
    for i in range(3):
        record.apply(ev.Replicate(i, 3))
        record.apply(ev.RunStarted(spec.to_dict(), {}, 1000 + i))
        record.apply(ev.Step(0, True, 30.0 + i, 10.0, 12.0, 8.0 + i))
        for k in range(1, 4):
            record.apply(ev.Step(k, False, 10.0 + k + i, 3.0, 5.0 + k, 2.0 + i))
    record.apply(ev.Finished("ok"))
    return record


def test_replicates_get_a_process_each_with_their_own_steps_from_zero():
    record = replicated_record()
    events = trace_of(record)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert [names[p] for p in (1, 2, 3)] == [f"process {i} of 3: {record.name} (ok)" for i in (1, 2, 3)]
    for pid, rep in zip((1, 2, 3), record.replicates):
        check_steps(events, rep.warmup_steps, rep.steps, pid=pid)
    assert len(of(events, "step")) == 3 * (1 + 3)                # the pooled steps are not drawn twice
    assert "3 processes" in json.loads(export(record, "trace"))["otherData"]["replicates"]


def test_a_record_without_steps_is_still_a_valid_trace():
    record = RunRecord(RunSpec(size="tiny", ctx=32, batch=2, device="cpu"), status="error")
    events = trace_of(record)
    assert not [e for e in events if e["ph"] != "M"]
    assert {e["name"] for e in events} == META_NAMES
    # And one whose profile, telemetry and steps are all empty.
    record.profile = Profile("torch", [], {"nvtx_sum": []})
    record.telemetry = {"series": {"t_s": []}}
    assert not [e for e in trace_of(record) if e["ph"] != "M"]


def test_an_imported_profile_s_trace_claims_no_run_configuration():
    from perfconsole.core.cli.profile_import import build_record
    from perfconsole.core.reports.trace import document

    record = build_record(Path("demo_cuda_gpu_kern_sum.csv"), {"cuda_gpu_kern_sum": []}, [])
    other = document(record)["otherData"]
    assert other["status"] == "imported" and other["spec"] is None  # not RunSpec()'s defaults: nothing ran


def test_a_phase_longer_than_its_step_is_cut_at_the_step_end_and_says_so():
    record = store.load(FP32)
    s = record.steps[0]
    record.steps[0] = ev.Step(s.index, False, 10.0, 4.0, 4.0, 4.0)   # phases add up to 12 ms
    events = trace_of(record)
    first = [e for e in of(events, "phase") if e["args"]["step"] == f"step {s.index}"]
    assert [e["dur"] for e in first] == pytest.approx([4000.0, 4000.0, 2000.0])
    assert first[-1]["args"] == {"ms": 4.0, "step": f"step {s.index}", "clipped_to_step_end": True}


def test_the_cli_writes_a_trace_file(tmp_path):
    out = tmp_path / "run.trace.json"
    p = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "export", str(H200), "--format", "trace",
                        "-o", str(out)], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert p.returncode == 0, p.stderr
    events = check_trace(json.loads(out.read_text()))
    assert len(of(events, "step")) == 11
    sweep = ROOT / "snapshots" / "tiny-cpu-sweep.json"
    p = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "export", str(sweep), "--format", "trace"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert p.returncode == 2 and "sweep snapshots export as md, csv, json, not 'trace'" in p.stderr


def test_exporting_leaves_the_record_as_it_was():
    record = store.load(H200)
    before = copy.deepcopy(record.to_dict())
    assert document(record) == document(record) and record.to_dict() == before


@pytest.mark.parametrize("break_it", [
    lambda evs: evs[[e.get("cat") for e in evs].index("phase")].update(dur=1e9),      # leaves its step
    lambda evs: evs[[e.get("cat") for e in evs].index("step")].update(ph="B"),        # a phase not allowed here
    lambda evs: evs[[e.get("cat") for e in evs].index("step")].update(ts=1e12),       # out of order on its track
    lambda evs: evs.pop(0),                                                           # a process without a name
])
def test_the_checks_catch_a_broken_trace(break_it):
    doc = document(store.load(FP32))
    break_it(doc["traceEvents"])
    with pytest.raises(AssertionError):
        check_trace(doc)

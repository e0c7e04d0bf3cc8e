"""A profiled run whose headline is a plain process (core.launch.profiled): the plain process's steps are the
record's, the capture process gives the profile and what running under the profiler cost outside its capture.

nsys needs CUDA, so on the CPU the torch profiler stands in for a profiler that runs apart (APART patched);
the real thing runs on the GPU machine (tests/core/launch/test_profiled_headline_gpu.py)."""
from __future__ import annotations

import statistics

import pytest

from perfconsole.core import events as ev
from perfconsole.core.launch import profiled
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.launch.replicates import RepeatedLaunch, make_launch
from perfconsole.core.measure.provenance import headline_problems
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.reports.export import export
from perfconsole.core.reports.profile import headline, outside_capture, overhead_lines
from perfconsole.core.settings import RunSpec
from helpers import TINY as TINY_RUN
from helpers import stream

TINY = TINY_RUN.with_(profile="torch")


@pytest.fixture
def torch_apart(monkeypatch):
    monkeypatch.setattr(profiled, "APART", ("torch",))


def run(launch, record: RunRecord, seen: list | None = None) -> RunRecord:
    launch.start()
    return stream(launch, record, seen)


@pytest.fixture(scope="module")
def two_plain_then_capture(tmp_path_factory):
    """One profiled run of two plain processes (--repeat 2) and a capture, and its events: the tests read them."""
    spec = TINY.with_(repeat=2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(profiled, "APART", ("torch",))
        launch = make_launch(spec, out_dir=tmp_path_factory.mktemp("profiled"))
        seen: list[ev.Event] = []
        return launch, run(launch, RunRecord(spec), seen), seen


@pytest.mark.e2e
def test_the_headline_is_the_plain_processes_and_the_profile_the_capture_process(two_plain_then_capture):
    launch, record, seen = two_plain_then_capture
    assert isinstance(launch, profiled.ProfiledLaunch) and launch.plain.spec.profile == "none"
    assert isinstance(launch.plain, RepeatedLaunch) and isinstance(launch.capture, Launch)
    assert record.status == "ok", record.error
    assert [e.type for e in seen].count("finished") == 1 and seen[-1].type == "finished"
    assert len([e for e in seen if isinstance(e, ev.RunStarted)]) == 2  # the plain ones: the capture's is not the run's
    # Every step in the stream came before the capture began: the plain processes', and only theirs.
    first_capture = next(i for i, e in enumerate(seen) if isinstance(e, ev.Progress) and "torch process" in e.detail)
    steps = [i for i, e in enumerate(seen) if isinstance(e, ev.Step)]
    assert steps and max(steps) < first_capture
    assert [r.index for r in record.replicates] == [0, 1] and len(record.steps) == 6
    assert record.summary.processes == 2 and record.summary.between_processes is not None
    o = record.profile.overhead
    assert record.profile.profiler == "torch" and record.profile.tables
    assert o["plain_ms"] == pytest.approx(record.summary.total_ms.median)
    assert o["plain_steps"] == 6 and len(o["quiet_step_ms"]) == 3
    assert o["plain_process_ms"] == pytest.approx([r.summary.total_ms.median for r in record.replicates])
    assert o["quiet_ms"] == pytest.approx(statistics.median(o["quiet_step_ms"]))
    assert not set(o["quiet_step_ms"]) & {s.total_ms for s in record.steps}  # another process's steps
    assert outside_capture(o) == pytest.approx(o["quiet_ms"] / o["plain_ms"] - 1)
    # The capture's progress reads as the profile's, its quiet steps included.
    details = [e.detail for e in seen if isinstance(e, ev.Progress)]
    assert any(d.startswith("under torch, not capturing: step 3/3") for d in details), details


@pytest.mark.e2e
def test_the_headline_s_processes_ran_no_profiler_and_the_capture_s_did(two_plain_then_capture):
    """By construction, not by times: each plain process read itself after its steps and named no profiler; the
    capture's process, another one, named the profiler during its profiled steps (core.measure.provenance)."""
    _launch, record, _seen = two_plain_then_capture
    assert [p["profiler"] for p in record.provenance] == [None, None]  # one for each plain process
    capture = record.profile.overhead["provenance"]
    assert capture["profiler"] == "torch" and capture["pid"] not in {p["pid"] for p in record.provenance}
    assert headline_problems(record) == []


@pytest.mark.e2e
def test_both_figures_are_kept_and_stated(two_plain_then_capture):
    _launch, record, _seen = two_plain_then_capture
    o = record.profile.overhead
    again = RunRecord.from_dict(record.to_dict())
    assert again.profile.overhead["quiet_step_ms"] == o["quiet_step_ms"] and again.steps == record.steps
    md = export(again, "md")
    assert "Under torch, not capturing: " in md and "The headline is a plain process" in md
    line = headline(again.profile, again.summary, len(again.steps))
    lo, hi = min(o["plain_process_ms"]), max(o["plain_process_ms"])
    assert f"under torch, not capturing {outside_capture(o) * 100:+.1f} % (plain processes {lo:.1f}-{hi:.1f} ms)" in line
    assert f"the 2 plain processes' medians ranged {lo:.3f}-{hi:.3f} ms" in md


@pytest.mark.e2e
def test_a_plain_process_that_fails_ends_the_run_before_any_capture(torch_apart):
    launch = make_launch(TINY, env={"PERFCONSOLE_FAULT": "raise:1"})
    seen: list[ev.Event] = []
    record = run(launch, RunRecord(TINY), seen)
    assert record.status == "error" and record.error.kind == "crash"
    assert launch.capture.proc is None and record.profile is None
    assert [e.type for e in seen].count("finished") == 1


@pytest.mark.e2e
def test_a_cancel_during_the_plain_process_runs_no_capture(torch_apart):
    launch = make_launch(TINY.with_(steps=400), env={"PERFCONSOLE_FAULT": "slow:20"})
    record = RunRecord(TINY)
    launch.start()
    for event in launch.events():
        record.apply(event)
        if isinstance(event, ev.Step) and not event.warmup:
            launch.cancel()
    assert record.status == "cancelled" and record.steps
    assert launch.capture.proc is None


def test_torch_runs_in_one_process_unless_it_is_apart():
    # The torch profiler starts inside the process, for its profiled steps only: its quiet steps are plain.
    assert "torch" not in profiled.APART and "nsys" in profiled.APART
    assert isinstance(make_launch(TINY), Launch)


def test_a_broken_nsys_runs_nothing_at_all(tmp_path):
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    spec = RunSpec(size="tiny", ctx=32, device="cuda", profile="nsys")
    launch = make_launch(spec, nsys=str(fake), out_dir=tmp_path / "out")
    record = run(launch, RunRecord(spec))
    assert record.status == "error" and record.error.kind == "profiler" and str(fake) in record.error.message
    assert launch.plain.proc is None and launch.capture.proc is None


def test_without_nsys_the_torch_fallback_runs_alone(monkeypatch):
    from perfconsole.core.launch import nsys

    monkeypatch.setattr(nsys, "find_nsys", lambda explicit=None: None)
    launch = make_launch(RunSpec(size="tiny", ctx=32, device="cuda", profile="nsys"))
    assert launch.apart() is False and launch.current is launch.capture


def test_the_report_states_the_cost_outside_the_capture_and_what_it_is_worth():
    o = {"profiler": "nsys", "quiet_ms": 186.0, "profiled_ms": 256.83, "ratio": 256.83 / 186.0, "quiet_steps": 10,
         "profiled_steps": 10, "plain_ms": 162.0, "plain_steps": 10, "quiet_step_ms": [186.0] * 10,
         "plain_process_ms": [162.0]}
    text = " ".join(overhead_lines(o))
    assert "Under nsys, not capturing: +14.8 % (186.000 ms" in text
    assert "capturing: 256.830 ms per step (1.585x the plain step, 1.381x" in text
    assert "one process against one: the spread between processes of one spec, not measured here" in text
    assert "(one process each)" in headline(Profile("nsys", [], {}, [], o), None, 10)
    # With --repeat, the plain processes' own spread is the yardstick, in figures.
    three = {**o, "plain_process_ms": [141.9, 153.6, 178.6]}
    text = " ".join(overhead_lines(three))
    assert "the 3 plain processes' medians ranged 141.900-178.600 ms (25.9 % apart), and the capture process's " \
           "quiet median lies outside that spread" in text
    assert "lies within that spread" in " ".join(overhead_lines({**three, "quiet_ms": 150.0}))
    assert "(plain processes 141.9-178.6 ms)" in headline(Profile("nsys", [], {}, [], three), None, 10)
    same_process = {k: v for k, v in o.items() if k not in ("plain_ms", "plain_steps", "quiet_step_ms", "plain_process_ms")}
    assert outside_capture(same_process) is None
    assert "quiet in the same process (1.381x" in " ".join(overhead_lines(same_process))

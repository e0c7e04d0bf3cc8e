"""The tiny model end to end through the real child process, and every failure path by fault injection."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from helpers import TINY as TINY_RUN, gone_or_zombie

TINY = TINY_RUN.with_(warmup=2, steps=4)


def run(spec: RunSpec, fault: str | None = None) -> tuple[RunRecord, list[ev.Event], Launch]:
    launch = Launch(spec, env={"PERFCONSOLE_FAULT": fault} if fault else None)
    record, seen = RunRecord(spec), []
    for event in launch.events():
        seen.append(event)
        record.apply(event)
    return record, seen, launch


@pytest.mark.e2e
@pytest.mark.parametrize("mode, phases", [("fwd", 1), ("fwd_bwd", 2), ("train", 3)])
def test_tiny_run_streams_a_well_formed_run(mode, phases):
    record, seen, _ = run(TINY.with_(mode=mode))
    types = [e.type for e in seen]
    assert types[0] == "run_started" and types[-1] == "finished" and types.count("finished") == 1
    assert types.count("step") == 6 and "summary" in types
    assert record.status == "ok" and record.error is None
    assert [s.index for s in record.warmup_steps] == [0, 1]
    assert [s.index for s in record.steps] == [2, 3, 4, 5]
    for s in record.steps:
        parts = [p for p in (s.forward_ms, s.backward_ms, s.optimizer_ms) if p is not None]
        assert len(parts) == phases and all(p > 0 for p in parts)
        assert s.total_ms == pytest.approx(sum(parts))
    sm = record.summary
    assert sm.total_ms.n == 4 and sm.warmup_ms == [s.total_ms for s in record.warmup_steps]
    assert sm.tokens_per_s == pytest.approx(2 * 32 / (sm.total_ms.mean / 1e3))
    assert (sm.backward_ms is None) == (mode == "fwd")
    assert (sm.optimizer_ms is None) == (mode != "train")
    assert record.environment["device"] == "cpu" and record.environment["torch"]


@pytest.mark.e2e
def test_zero_warmup_and_bf16_on_cpu():
    record, _, _ = run(TINY.with_(warmup=0, precision="bf16", steps=2))
    assert record.status == "ok" and record.warmup_steps == [] and record.summary.warmup_ms == []


@pytest.mark.e2e
def test_injected_oom_is_an_oom_event_and_a_clean_exit_keeping_steps():
    record, seen, launch = run(TINY, fault="oom:4")
    assert record.status == "oom"
    assert record.error.kind == "oom" and "out of memory" in record.error.message
    assert launch.proc.returncode == 0
    assert len(record.warmup_steps) == 2 and len(record.steps) == 2  # steps 2 and 3 measured
    assert record.summary is not None and record.summary.total_ms.n == 2


@pytest.mark.e2e
def test_python_exception_is_a_crash_with_traceback():
    record, _, launch = run(TINY, fault="raise:1")
    assert record.status == "error" and record.error.kind == "crash"
    assert "injected failure" in record.error.message and "Traceback" in record.error.detail
    assert launch.proc.returncode == 1 and len(record.warmup_steps) == 1


@pytest.mark.e2e
def test_silent_exit_is_reported_with_its_code():
    record, _, _ = run(TINY, fault="exit:3")
    assert record.status == "error" and record.error.kind == "crash"
    assert "exited with code 3" in record.error.message
    assert len(record.warmup_steps) == 2 and len(record.steps) == 1


@pytest.mark.e2e
def test_kill_is_reported_with_the_signal():
    record, _, _ = run(TINY, fault="kill:2")
    assert record.status == "error" and "SIGKILL" in record.error.message
    assert len(record.warmup_steps) == 2 and record.steps == []


@pytest.mark.e2e
def test_cancel_kills_the_whole_group_and_keeps_steps():
    launch = Launch(TINY.with_(steps=1000), env={"PERFCONSOLE_FAULT": "slow:20"})
    record = RunRecord(TINY)
    for event in launch.events():
        record.apply(event)
        if isinstance(event, ev.Step) and not event.warmup:
            launch.cancel()
    assert record.status == "cancelled" and record.error.kind == "cancelled"
    assert len(record.steps) >= 1
    assert gone_or_zombie(launch.pid)


@pytest.mark.e2e
def test_hung_worker_is_killed_by_cancel():
    launch = Launch(TINY, env={"PERFCONSOLE_FAULT": "hang:1"})
    launch.start()
    import threading

    threading.Timer(3.0, launch.cancel).start()
    t0 = time.monotonic()
    statuses = [e.status for e in launch.events() if isinstance(e, ev.Finished)]
    assert statuses == ["cancelled"] and time.monotonic() - t0 < 30


@pytest.mark.e2e
def test_spec_error_from_the_worker():
    record, seen, launch = run(TINY.with_(ctx=0))  # the worker validates too
    assert record.status == "error" and record.error.kind == "spec" and "ctx" in record.error.message


def test_no_orphan_when_the_parent_dies(tmp_path):
    """Kill -9 the process that launched a worker: the worker must go too."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys\n"
        "from perfconsole.core.launch.launcher import Launch\n"
        "from perfconsole.core.settings import RunSpec\n"
        "l = Launch(RunSpec(size='tiny', ctx=32, device='cpu', steps=100000, warmup=0),"
        " env={'PERFCONSOLE_FAULT': 'slow:50'})\n"
        "for e in l.events():\n"
        "    if e.type == 'step':\n"
        "        print(l.pid, flush=True)\n"
        "        break\n"
        "import time; time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    assert psutil.pid_exists(child_pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if gone_or_zombie(child_pid):
            break
        time.sleep(0.1)
    else:
        os.kill(child_pid, signal.SIGKILL)
        pytest.fail("worker outlived its parent")


def test_a_broken_nsys_named_by_the_user_is_a_clean_error(tmp_path):
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    spec = RunSpec(size="tiny", ctx=32, device="cuda", profile="nsys")
    record = RunRecord(spec)
    launch = Launch(spec, nsys=str(fake), out_dir=tmp_path / "out")
    for event in launch.events():
        record.apply(event)
    assert record.status == "error" and record.error.kind == "profiler"
    assert str(fake) in record.error.message and launch.proc is None


def test_events_glued_to_other_text_on_the_shared_stdout_are_kept():
    # nsys prints its report's progress bar on the worker's stdout without a line end, so the worker's next
    # event line arrives after nsys's text (or with text after it). The event is kept, the text is nsys's.
    from perfconsole.core.launch.launcher import events_in

    line = ev.Step(3, False, 12.5, forward_ms=4.0).to_json()
    for before, after in [("[1/1] [========   36%] profile.nsys-rep", ""), ("", "Generated:"),
                          ("Generating '/tmp/nsys-report-1a2b.qdstrm'", " [1/1] [0%]")]:
        event, others = events_in(before + line + after)
        assert isinstance(event, ev.Step) and event.index == 3 and event.forward_ms == 4.0
        assert others == [t.strip() for t in (before, after) if t]
    assert events_in("Collecting data...") == (None, ["Collecting data..."])
    assert events_in('[1/1] {"v": 1, "type": "st') == (None, ['[1/1] {"v": 1, "type": "st'])
    assert events_in("   ") == (None, [])


class _GluedLaunch(Launch):
    """The real worker, started by a parent that first writes a progress bar with no line end to the same
    stdout, as nsys does (nsys itself is tested on the GPU machine: tests/core/profiling/test_nsys_gpu.py)."""

    def command(self):
        argv = super().command()
        prefix = ("import os, sys; os.write(1, b'[1/1] [=====     23%] profile.nsys-rep'); "
                  "os.execv(sys.argv[1], sys.argv[1:])")
        return [sys.executable, "-c", prefix, *argv]


@pytest.mark.e2e
def test_a_run_behind_a_progress_bar_on_its_stdout_loses_no_event():
    launch = _GluedLaunch(TINY)
    record, seen = RunRecord(TINY), []
    for event in launch.events():
        seen.append(event)
        record.apply(event)
    types = [e.type for e in seen]
    assert types[0] == "run_started" and types.count("step") == 6 and types[-1] == "finished"
    assert record.status == "ok" and record.environment
    assert list(launch.other_stdout) == ["[1/1] [=====     23%] profile.nsys-rep"]

"""A real CPU trace: `perfconsole run --size tiny --device cpu --profile torch --save`, then its timeline from the
snapshot, checked against the trace's own events: a lane of outermost CPU ops per host thread, the ranges by depth,
the steps, the busy share; and `perfconsole timeline` on the snapshot."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from perfconsole.core import store
from perfconsole.core.timeline.load import load_timeline
from perfconsole.core.timeline.source import record_traces

pytestmark = pytest.mark.e2e


def test_a_cpu_runs_timeline_has_its_threads_ops_and_ranges(tmp_path, merged):
    from helpers import pc

    snap = tmp_path / "cpu.json"
    out = pc("run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "1", "--warmup", "1",
             "--steps", "2", "--profile", "torch", "--save", str(snap))
    assert out.returncode == 0, out.stderr
    traces = record_traces(store.load(snap), snap)
    assert [r for r, _ in traces] == [0]
    tl = load_timeline([traces[0][1]])
    events = [e for e in json.load(open(traces[0][1]))["traceEvents"] if e.get("ph") == "X"]
    # the outermost CPU ops of each thread, by a sweep of this test's own
    outer = defaultdict(int)
    by_thread = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            by_thread[e["tid"]].append(e)
    intervals = []
    for tid, evs in by_thread.items():
        end = float("-inf")
        for e in sorted(evs, key=lambda e: (e["ts"], -e["dur"])):
            if e["ts"] >= end:
                outer[f"cpu t{tid}"] += 1
                end = e["ts"] + e["dur"]
                intervals.append((e["ts"], e["ts"] + e["dur"]))
    lanes = {lane.label: len(lane) for lane in tl.lanes if lane.kind == "cpu_ops"}
    assert lanes == dict(outer) and lanes
    ranges = sum(1 for e in events if e.get("cat") == "user_annotation")
    assert sum(len(lane) for lane in tl.lanes if lane.kind == "ranges") == ranges
    forwards = sorted(e["ts"] for e in events if e.get("cat") == "user_annotation" and e["name"] == "forward")
    assert len(tl.ranks[0].steps) == len(forwards) == 2
    union = merged(intervals)
    first, last = union[0][0], union[-1][1]
    t0, t1 = round((first - tl.origin_us) * 1000), round((last - tl.origin_us) * 1000)
    assert tl.busy_share(0, t0, t1) == pytest.approx(sum(b - a for a, b in union) / (last - first), abs=1e-5)
    printed = pc("timeline", str(snap), "--width", "70", "--ascii", "--step", "2")
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines[1].startswith("step 2 of 2: ")
    assert any(line.startswith("cpu t") and len(line.split(" ", 2)[-1]) <= 70 for line in lines)
    assert any(line.startswith("cpu busy ") for line in lines)

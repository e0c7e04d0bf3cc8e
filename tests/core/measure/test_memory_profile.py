"""Memory profiling: extraction from a snapshot dict and the report on CPU; the real capture on a GPU."""
from __future__ import annotations

import json

import pytest

from perfconsole.core import events as ev
from perfconsole.core.measure import memory_profile as mp
from perfconsole.core.record import MemoryInfo, RunRecord
from perfconsole.core.reports.run import markdown
from perfconsole.core.settings import RunSpec

MIB = 2**20


def _alloc(addr, size, t, frames=None, action="alloc"):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": frames or []}


SOFTMAX = [{"filename": "/x/torch/nn/modules/module.py", "line": 1, "name": "_call_impl"},
           {"filename": "/src/model/transformer.py", "line": 77, "name": "naive_attention"}]
LINEAR = [{"filename": "/src/model/transformer.py", "line": 27, "name": "forward"}]


def _snapshot():
    trace = [
        _alloc(1, 100 * MIB, 1000, SOFTMAX),
        _alloc(2, 4 * MIB, 2000, LINEAR),
        _alloc(1, 100 * MIB, 3000, action="free_requested"),
        _alloc(1, 100 * MIB, 3500, action="free_completed"),
        _alloc(3, 100 * MIB, 4000, SOFTMAX),
        _alloc(4, 1 * MIB, 5000, LINEAR),
    ]
    return {"segments": [], "device_traces": [trace]}


def test_timeline_follows_alloc_and_completed_free_from_the_baseline():
    tl = mp.timeline(_snapshot(), baseline_bytes=50 * MIB)
    assert tl["allocated_mib"] == [150, 154, 54, 154, 155]
    assert tl["t_ms"] == [0.0, 1.0, 2.5, 3.0, 4.0]


def test_timeline_downsampling_keeps_the_peak():
    trace = [_alloc(i, MIB, i) for i in range(1000)] + [_alloc(0, 1000 * MIB, 2000, action="free_completed")]
    tl = mp.timeline({"device_traces": [trace]}, points=50)
    assert len(tl["allocated_mib"]) == 50
    assert max(tl["allocated_mib"]) == 1000


def test_timeline_without_times_uses_event_index():
    trace = [{"action": "alloc", "size": MIB, "frames": []}, {"action": "free_completed", "size": MIB}]
    assert mp.timeline({"device_traces": [trace]})["t_ms"] == [0.0, 1.0]


def test_top_allocations_group_by_size_and_site_and_hide_torch_frames():
    top = mp.top_allocations(_snapshot(), n=2)
    assert top[0]["size_mib"] == 100 and top[0]["count"] == 2
    assert top[0]["frames"] == ["/src/model/transformer.py:77 naive_attention"]
    assert top[1]["size_mib"] == 4


def test_dump_is_pickle_protocol_4_named_by_run(tmp_path):
    spec = RunSpec(size="xl", ctx=512, device="cuda", memory=True)
    path = mp.dump_snapshot(_snapshot(), mp.snapshot_file(tmp_path, spec))
    assert path.name == "memory-xl_ctx512_b4_fp32_fwd_bwd.pickle"
    assert path.read_bytes()[:2] == b"\x80\x04"  # PROTO 4 opcode; we never unpickle to check


def test_run_markdown_shows_phases_chart_and_allocations():
    snap = _snapshot()
    details = {"baseline_mib": 50.0, "timeline": mp.timeline(snap, 50 * MIB),
               "top_allocations": mp.top_allocations(snap), "viewer": "https://pytorch.org/memory_viz"}
    rec = RunRecord(RunSpec(size="xl", ctx=512, mode="train", device="cuda", memory=True), status="ok")
    rec.memory = MemoryInfo(155.0, 200.0, {"forward": {"peak_allocated_mib": 155.0, "peak_reserved_mib": 200.0,
                                                       "allocated_after_mib": 150.0}}, "/tmp/m.pickle", details)
    text = markdown(rec)
    assert "| forward | 155 | 200 | 150 |" in text
    assert "| 100.0 | 2 | `/src/model/transformer.py:77 naive_attention` |" in text
    assert "▁" in text and "█" in text
    # and the details survive the snapshot round trip as plain JSON
    again = RunRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again.memory.details["top_allocations"][0]["count"] == 2


@pytest.mark.gpu
@pytest.mark.shares_gpu  # the allocator's history is the process's own
def test_real_capture_over_a_train_step(tmp_path):
    from perfconsole.core.measure import bench
    from perfconsole.core.measure.environment import collect

    spec = RunSpec(size="tiny", ctx=64, batch=2, mode="train", warmup=1, steps=2, device="cuda",
                   memory=True).validate()
    got: list[ev.Event] = []
    bench.run(spec, got.append, collect("cuda"), tmp_path)
    mem = next(e for e in got if isinstance(e, ev.Memory))
    assert set(mem.per_phase) == {"forward", "backward", "optimizer_step"}
    assert mem.peak_allocated_mib >= max(p["peak_allocated_mib"] for p in mem.per_phase.values())
    assert mem.snapshot_path and open(mem.snapshot_path, "rb").read(2) == b"\x80\x04"
    assert len(mem.details["timeline"]["allocated_mib"]) > 10
    assert mem.details["top_allocations"][0]["size_mib"] > 0
    summary = next(e for e in got if isinstance(e, ev.SummaryReady)).summary
    assert summary["peak_allocated_mib"] == mem.peak_allocated_mib


def test_allocator_retries_travel_from_the_event_to_the_saved_record_and_the_report():
    rec = RunRecord(RunSpec(size="tiny", device="cpu"))
    rec.apply(ev.Memory(70_000.0, 74_000.0, alloc_retries=3))
    assert rec.memory is not None and rec.memory.alloc_retries == 3
    again = RunRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again.memory is not None and again.memory.alloc_retries == 3
    text = markdown(again)
    assert "ran out of cached memory 3 times" in text and "expandable_segments:True" in text
    # None (a CPU run, or a record saved before the count existed) and 0 say nothing.
    old = rec.to_dict()
    del old["memory"]["alloc_retries"]
    assert RunRecord.from_dict(old).memory.alloc_retries is None
    rec.apply(ev.Memory(70_000.0, 74_000.0, alloc_retries=0))
    assert "ran out of cached memory" not in markdown(rec)


def test_the_retry_warning_says_how_many_in_how_many_steps():
    line = mp.retry_warning(4, 10)
    assert line.startswith("the caching allocator ran out of cached memory 4 times in 10 steps")

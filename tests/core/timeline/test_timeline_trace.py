"""The timeline of a real H200 trace (llama 1B, bf16 weights, CUDA graphs, 3 steps), checked against figures this
test computes from the trace's own events: lanes and their counts, the GPU's busy share and idle gaps, the ranges,
the steps; and the drawing's shape at a width. Also the CLI's lines on the trace and on sources without times."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from perfconsole.core.cli.main import main
from perfconsole.core.timeline.load import load_timeline
from perfconsole.core.timeline.render import render

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TRACE = FIXTURES / "torch_traces" / "h200_llama1B_bf16w_cudagraphs_3steps.json.gz"
NVPROF = FIXTURES / "nvprof" / "llmc_train_gpt2cu_nvtx.log"


@pytest.fixture(scope="module")
def events():
    return [e for e in json.load(gzip.open(TRACE, "rt"))["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def tl():
    return load_timeline([TRACE])


def test_one_lane_per_stream_and_one_for_copies_and_memsets(events, tl):
    streams = Counter(f"gpu{e['args']['device']} s{e['args']['stream']}" for e in events if e["cat"] == "kernel")
    memory = sum(1 for e in events if e["cat"] in ("gpu_memcpy", "gpu_memset"))
    lanes = {lane.label: len(lane) for lane in tl.lanes if lane.kind in ("kernels", "memory")}
    assert lanes == {**streams, "gpu0 mem": memory}
    assert streams == {"gpu0 s7": 2475} and memory == 831


def test_the_ranges_nest_by_depth_host_and_gpu_side(events, tl):
    host = [e for e in events if e["cat"] == "user_annotation"]
    gpu = [e for e in events if e["cat"] == "gpu_user_annotation"]
    by_kind = Counter()
    for lane in tl.lanes:
        by_kind[lane.kind] += len(lane)
    assert by_kind["ranges"] == len(host) and by_kind["gpu_ranges"] == len(gpu)
    inner = next(lane for lane in tl.lanes if lane.kind == "ranges" and lane.depth == 1)
    # AdamW's own step range sits inside the worker's optimizer_step range, three times
    assert {tl.names[i] for i in inner.names} == {"Optimizer.step#AdamW.step"} and len(inner) == 3


def test_busy_share_and_gaps_match_the_union_of_the_gpu_events(events, tl, merged):
    gpu = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    union = merged(gpu)
    first, last = union[0][0], union[-1][1]
    busy = sum(b - a for a, b in union)
    gaps = [(a[1], b[0]) for a, b in zip(union, union[1:]) if b[0] - a[1] >= 10.0]
    origin = tl.origin_us
    t0, t1 = round((first - origin) * 1000), round((last - origin) * 1000)
    assert tl.busy_share(0, t0, t1) == pytest.approx(busy / (last - first), abs=1e-6)
    gs, ge = tl.gaps(0, t0, t1, 10_000)
    assert len(gs) == len(gaps) > 0
    for (a, b), s, e in zip(gaps, gs.tolist(), ge.tolist()):
        assert abs(s / 1000 + origin - a) < 0.002 and abs(e / 1000 + origin - b) < 0.002


def test_three_steps_each_covering_its_forward_on_host_and_gpu(events, tl):
    steps = tl.ranks[0].steps
    assert [s.index for s in steps] == [1, 2, 3]
    for kind in ("user_annotation", "gpu_user_annotation"):
        forwards = sorted(e["ts"] for e in events if e["cat"] == kind and e["name"] == "forward")
        for s, ts in zip(steps, forwards):
            assert s.start <= round((ts - tl.origin_us) * 1000) < s.end
    with pytest.raises(Exception, match="steps 1 to 3"):
        tl.step(4)


def test_a_kernel_is_described_with_its_category_and_phase(tl):
    lane = tl.lanes[0]
    names = [tl.names[i] for i in lane.names]
    k = tl.kernel(lane.key, next(i for i, n in enumerate(names) if "sdpa" in n and "fprop" in n))
    assert k.category == "attention" and k.duration > 0
    # launched by a CUDA graph, so its phase is the GPU-side range it ran in
    assert k.phase == "forward"
    bwd = tl.kernel(lane.key, next(i for i, n in enumerate(names) if "sdpa" in n and "bprop" in n))
    assert bwd.phase == "backward"


def test_each_kernel_keeps_its_launchs_grid_and_block(events, tl):
    lane = tl.lanes[0]
    want = sorted((e["ts"], tuple(e["args"]["grid"]), tuple(e["args"]["block"])) for e in events
                  if e["cat"] == "kernel" and e["args"]["stream"] == 7)
    got = [tl.kernel(lane.key, i) for i in range(len(lane))]
    assert [(k.grid, k.block) for k in got] == [(g, b) for _, g, b in want]
    assert len({k.grid for k in got}) > 10
    memory = next(x for x in tl.lanes if x.kind == "memory")
    assert tl.kernel(memory.key, 0).grid is None   # a copy has no launch shape


@pytest.mark.parametrize("ascii_only", [False, True])
def test_every_row_is_as_wide_as_asked_and_a_busy_stream_is_drawn_full(tl, ascii_only):
    step = tl.step(2)
    frame = render(tl, step.start, step.end, 73, ascii_only=ascii_only, launches=True)
    assert all(len(r.text) == 73 and len(r.cats) == 73 for r in frame.rows) and len(frame.axis) == 73
    stream = frame.rows[0].text
    # the step's GPU is busy 98.8 % (the union above): nearly every column of the stream at least three quarters busy
    full = sum(ch in ("█" if not ascii_only else "MASNEROYCX") for ch in stream)
    assert full >= 70
    assert any(r.lane.endswith("launch") for r in frame.rows)
    if ascii_only:
        assert all(ord(ch) < 128 for line in frame.lines() for ch in line)


def test_the_cli_prints_the_rows_and_the_gaps(tl, capsys):
    assert main(["timeline", str(TRACE), "--step", "1", "--width", "60", "--ascii"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("step 1 of 3: ")
    rows = [line for line in out if line.startswith(("gpu0 s7", "gpu0 mem", "ranges"))]
    assert len(rows) == 3 and all(len(line) == len(rows[0]) for line in rows)
    assert any(line.startswith("gpu0 busy ") and "% of the window" in line for line in out)


@pytest.mark.parametrize("source, what", [
    (NVPROF, "an nvprof summary log has no timestamps"),
    (FIXTURES / "nsys" / "gpa" / "demo_cuda_gpu_kern_sum.csv", "an nsys stats table has no timestamps"),
])
def test_a_source_without_timestamps_says_so_in_one_line(capsys, source, what):
    assert main(["timeline", str(source)]) == 2
    err = capsys.readouterr().err
    assert what in err and err.count("\n") == 1


def test_a_step_past_the_last_is_bad_input(capsys):
    assert main(["timeline", str(TRACE), "--step", "9"]) == 2
    assert "the trace holds steps 1 to 3" in capsys.readouterr().err

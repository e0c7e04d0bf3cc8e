"""The timeline of a two-rank DDP job's torch profiler traces (perfconsole's own run on two H100s, NCCL's all-reduce
on a stream of its own: tests/fixtures/ddp_traces/SOURCE.txt), checked against figures this test computes from the
traces' own events: each rank's lanes and their counts, the NCCL kernels' stream and category, each rank's 2nd step
and its busy share, the overlap of NCCL with compute on rank 0 (core.profiling.overlap's figure); and the CLI's row
for the NCCL stream."""
from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from perfconsole.core.cli.main import main
from perfconsole.core.profiling.categories import CATEGORIES
from perfconsole.core.profiling.overlap import trace_overlap
from perfconsole.core.timeline.load import load_timeline

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "ddp_traces"
RANKS = [TRACES / f"h100_small_ddp2_rank{r}_3steps.json.gz" for r in (0, 1)]
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")   # a GPU's busy time: its kernels, copies and memsets


@pytest.fixture(scope="module")
def events():
    """Each rank's complete events ("ph": "X"), rank 0 first, read from its trace."""
    out = []
    for path in RANKS:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            out.append([e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"])
    return out


@pytest.fixture(scope="module")
def tl():
    return load_timeline(RANKS, [0, 1])


def is_nccl(e) -> bool:
    return "nccl" in e["name"].lower()


def step_window(evs, n: int) -> tuple[float, float]:
    """Step n (1-based) as core/timeline/load.py's docstring defines it, from the trace's own events, in trace us:
    the host side from its `forward` range to the next one's (the last step: to the end of the last range), widened
    to the first start and last end of the GPU activity launched (cuda_runtime or cuda_driver call of the same
    correlation id) from that forward range on and before the next."""
    ranges = [e for e in evs if e["cat"] == "user_annotation"]
    assert not any(e["name"].startswith("ProfilerStep#") for e in ranges)   # so `forward` opens each step
    forwards = sorted(e["ts"] for e in ranges if e["name"] == "forward")
    lo = forwards[n - 1]
    hi = forwards[n] if n < len(forwards) else max(e["ts"] + e["dur"] for e in ranges)
    before = forwards[n] if n < len(forwards) else math.inf
    launched = {e["args"]["correlation"]: e["ts"] for e in evs
                if e["cat"] in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    mine = [e for e in evs if e["cat"] in DEVICE and lo <= launched.get(e["args"].get("correlation"), -math.inf) < before]
    return min([lo] + [e["ts"] for e in mine]), max([hi] + [e["ts"] + e["dur"] for e in mine])


def covered(intervals) -> float:
    return sum(b - a for a, b in intervals)


def test_each_rank_has_its_own_lanes_one_per_stream_that_ran_kernels(events, tl):
    assert [r.rank for r in tl.ranks] == [0, 1]
    for rank, evs in enumerate(events):
        streams = Counter(f"gpu{e['args']['device']} s{e['args']['stream']}" for e in evs if e["cat"] == "kernel")
        memory = Counter(f"gpu{e['args']['device']} mem" for e in evs if e["cat"] in ("gpu_memcpy", "gpu_memset"))
        lanes = {lane.label: len(lane) for lane in tl.lanes if lane.rank == rank and lane.kind in ("kernels", "memory")}
        assert lanes == {**streams, **memory}
        assert streams == {f"gpu{rank} s7": 5717, f"gpu{rank} s19": 56} and memory == {f"gpu{rank} mem": 939}
        assert tl.rank(rank).device == f"gpu{rank}" and len(tl.rank(rank).steps) == 3
    keys = [lane.key for lane in tl.lanes]
    assert len(keys) == len(set(keys)) and "r0 gpu0 s19" in keys and "r1 gpu1 s19" in keys


def test_the_nccl_kernels_run_on_a_stream_of_their_own_and_are_communication(events, tl):
    communication = CATEGORIES.index("communication")
    for rank, evs in enumerate(events):
        kernels = [e for e in evs if e["cat"] == "kernel"]
        nccl = {e["args"]["stream"] for e in kernels if is_nccl(e)}
        assert len(nccl) == 1 and not nccl & {e["args"]["stream"] for e in kernels if not is_nccl(e)}
        label = f"gpu{rank} s{next(iter(nccl))}"
        lane = next(x for x in tl.lanes if x.rank == rank and x.label == label)
        assert len(lane) == sum(map(is_nccl, kernels)) == 54 + 2   # 18 all-reduces a step, 2 broadcasts
        assert set(lane.cats.tolist()) == {communication}
        assert tl.kernel(lane.key, 0).category == "communication"
        assert all(communication not in x.cats for x in tl.kernel_lanes(rank) if x.key != lane.key)


@pytest.mark.parametrize("rank, share", [(0, 0.475), (1, 0.275)])
def test_the_steps_and_the_second_ones_busy_share_match_the_ranks_own_events(events, tl, merged, rank, share):
    evs = events[rank]
    origin = tl.origin_us
    windows = [step_window(evs, n) for n in (1, 2, 3)]
    for step, (lo, hi) in zip(tl.rank(rank).steps, windows, strict=True):
        assert abs(step.start - (lo - origin) * 1000) <= 1 and abs(step.end - (hi - origin) * 1000) <= 1
    (lo, hi), step = windows[1], tl.step(2, rank)
    union = merged([(e["ts"], e["ts"] + e["dur"]) for e in evs if e["cat"] in DEVICE])
    busy = covered((max(a, lo), min(b, hi)) for a, b in union if b > lo and a < hi)
    assert tl.busy_share(rank, step.start, step.end) == pytest.approx(busy / (hi - lo), abs=1e-6)
    assert round(busy / (hi - lo), 3) == share


def test_the_overlap_of_nccl_with_compute_on_rank0_is_the_intersection_of_their_intervals(events, tl, merged,
                                                                                          tmp_path):
    """overlap.py's figure for rank 0's trace, against the intersection of the union of its NCCL kernels with the
    union of its other kernels, here by inclusion-exclusion: |A ∩ B| = |A| + |B| - |A ∪ B| (us, from the trace's
    first event, to keep the float sums exact enough)."""
    kernels = [e for e in events[0] if e["cat"] == "kernel"]
    t0 = min(e["ts"] for e in events[0])
    steps = tl.rank(0).steps
    first, last = steps[0].start / 1000 + tl.origin_us, steps[-1].end / 1000 + tl.origin_us
    # every kernel ran inside the 3 steps: the trace's overlap is the 3 steps'
    assert all(first - 0.001 <= e["ts"] and e["ts"] + e["dur"] <= last + 0.001 for e in kernels)
    comm = merged([(e["ts"] - t0, e["ts"] - t0 + e["dur"]) for e in kernels if is_nccl(e)])
    compute = merged([(e["ts"] - t0, e["ts"] - t0 + e["dur"]) for e in kernels if not is_nccl(e)])
    both = covered(comm) + covered(compute) - covered(merged(comm + compute))
    plain = tmp_path / "torch_trace.json"   # a run leaves a plain .json; a .json.gz reads the same
    plain.write_bytes(gzip.decompress(RANKS[0].read_bytes()))
    o = trace_overlap(plain)
    assert trace_overlap(RANKS[0]) == o
    assert (o.comm_kernels, o.other_kernels) == (56, 5717)
    assert o.comm_kernel_ms == pytest.approx(covered(comm) / 1000, abs=1e-5)
    assert o.overlapped_ms == pytest.approx(both / 1000, abs=1e-5)
    assert o.overlap_share == pytest.approx(both / covered(comm), abs=1e-6)
    assert round(covered(comm) / 1000, 1) == 133.1 and round(both / 1000, 2) == 9.07   # 6.8 % under compute


def test_the_cli_draws_a_row_for_the_nccl_stream(events, merged, capsys):
    lo, hi = step_window(events[0], 2)
    union = [(e["ts"], e["ts"] + e["dur"]) for e in events[0] if e["cat"] in DEVICE]
    assert main(["timeline", str(RANKS[0]), "--width", "100", "--step", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("step 2 of 3: ")
    nccl = next(line for line in out if line.startswith("gpu0 s19 "))
    compute = next(line for line in out if line.startswith("gpu0 s7 "))
    assert len(nccl) == len(compute) and nccl[-100:].strip() and nccl[-101] == " "
    busy = [line for line in out if line.startswith("gpu0 busy ")]
    share = covered((max(a, lo), min(b, hi)) for a, b in merged(union) if b > lo and a < hi) / (hi - lo)
    assert len(busy) == 1 and busy[0].startswith(f"gpu0 busy {share * 100:.1f} % of the window")
    # in letters: the NCCL row holds communication only (C, c), the compute stream none of it
    assert main(["timeline", str(RANKS[0]), "--width", "100", "--step", "2", "--ascii"]) == 0
    out = capsys.readouterr().out.splitlines()
    nccl = next(line for line in out if line.startswith("gpu0 s19 "))[-100:]
    compute = next(line for line in out if line.startswith("gpu0 s7 "))[-100:]
    assert set(nccl) - {" "} <= {"C", "c"} and "C" in nccl
    assert not set(compute) & {"C", "c"} and compute.strip()

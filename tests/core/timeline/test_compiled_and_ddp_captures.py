"""The timeline of perfconsole's own captures on H200s (tests/fixtures/nsys_sqlite/SOURCE.txt and
tests/fixtures/compiled_traces/SOURCE.txt), checked against figures this test computes from each file's own SQL or
events: a torch.compile'd training step under nsys (Triton kernels, the steps from the `forward` ranges, the busy share
and idle gaps of a step) and under the torch profiler (its lanes and Triton kernels), and the nsys exports of both ranks
of an eager DDP job loaded together (a lane group a rank, the NCCL stream, the two sessions on one clock, the busy
share of a step on each rank)."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from perfconsole.core import store
from perfconsole.core.profiling.categories import CATEGORIES
from perfconsole.core.timeline.load import load_timeline
from perfconsole.core.timeline.source import record_traces

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
COMPILED = FIXTURES / "nsys_sqlite" / "h200_small_train_bf16_compiled_nsys.sqlite.gz"
DDP = [FIXTURES / "nsys_sqlite" / f"h200_small_ddp2_rank{r}_nsys.sqlite.gz" for r in (0, 1)]
TRACE = FIXTURES / "compiled_traces" / "h200_small_train_bf16_compiled_2steps.json.gz"
DEVICE_TABLES = ("KERNEL", "MEMCPY", "MEMSET")
KERNEL_NAMES = ("select s.value from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.demangledName")


def unzip(src: Path, folder: Path) -> Path:
    path = folder / src.name.removesuffix(".gz")
    with gzip.open(src) as f, path.open("wb") as out:
        shutil.copyfileobj(f, out)
    return path


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    """The three exports, decompressed: the compiled capture, then rank 0's and rank 1's."""
    folder = tmp_path_factory.mktemp("h200_nsys")
    return [unzip(src, folder) for src in (COMPILED, *DDP)]


@pytest.fixture(scope="module")
def dbs(paths):
    cons = [sqlite3.connect(f"file:{p}?mode=ro", uri=True) for p in paths]
    yield cons
    for con in cons:
        con.close()


@pytest.fixture(scope="module")
def compiled_tl(paths):
    return load_timeline([paths[0]])


@pytest.fixture(scope="module")
def ddp_tl(paths):
    return load_timeline(paths[1:])


def device_lane_counts(tl) -> dict[str, int]:
    """The timeline's kernel and memory lanes: label -> events."""
    return {lane.label: len(lane) for lane in tl.lanes if lane.kind in ("kernels", "memory")}


def events_by_lane_kind(tl) -> Counter:
    """The timeline's events summed by lane kind (kernels, memory, ranges, gpu_ranges, launches)."""
    by_kind: Counter = Counter()
    for lane in tl.lanes:
        by_kind[lane.kind] += len(lane)
    return by_kind


def device_lanes(db) -> tuple[dict[str, int], dict[str, int]]:
    """By the file's SQL: kernels a (device, stream), copies and memsets together a device."""
    streams = {f"gpu{d} s{s}": n for d, s, n in db.execute(
        "select deviceId, streamId, count(*) from CUPTI_ACTIVITY_KIND_KERNEL group by deviceId, streamId")}
    memory = {f"gpu{d} mem": n for d, n in db.execute(
        "select deviceId, count(*) from (select deviceId from CUPTI_ACTIVITY_KIND_MEMCPY union all "
        "select deviceId from CUPTI_ACTIVITY_KIND_MEMSET) group by deviceId")}
    return streams, memory


def step_windows(db) -> list[tuple[int, int]]:
    """The steps as core.timeline.load defines them, by SQL, in the file's ns: from each `forward` range's start to the
    next one's (the last: to the end of the last range), widened to the first and last GPU activity launched by a
    runtime call that began in that span."""
    forwards = [s for (s,) in db.execute(
        "select start from NVTX_EVENTS where eventType = 59 and text = 'forward' order by start")]
    last_range_end = db.execute("select max(end) from NVTX_EVENTS where eventType in (59, 60)").fetchone()[0]
    out = []
    for i, lo in enumerate(forwards):
        hi = forwards[i + 1] if i + 1 < len(forwards) else 2 ** 62
        spans = [db.execute(f"select min(d.start), max(d.end) from CUPTI_ACTIVITY_KIND_{t} d join "
                            "CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = d.correlationId "
                            "where r.start >= ? and r.start < ?", (lo, hi)).fetchone() for t in DEVICE_TABLES]
        first = min([lo] + [a for a, _ in spans if a is not None])
        last = max([hi if hi < 2 ** 62 else last_range_end] + [b for _, b in spans if b is not None])
        out.append((first, last))
    return out


def busy_in(db, lo: int, hi: int, merged) -> list[list[int]]:
    """The union of the device's kernels, copies and memsets, clipped to [lo, hi) (the file's ns)."""
    return merged([(max(a, lo), min(b, hi)) for t in DEVICE_TABLES for a, b in db.execute(
        f"select start, end from CUPTI_ACTIVITY_KIND_{t} where end > ? and start < ?", (lo, hi))])


def session_start(db) -> int:
    return db.execute("select utcEpochNs from TARGET_INFO_SESSION_START_TIME").fetchone()[0]


# --- a torch.compile'd training step under nsys: one GPU, one stream, Triton kernels ---------------------------------

def test_compiled_one_lane_a_stream_the_memory_lane_the_ranges_and_the_launches(dbs, compiled_tl):
    db = dbs[0]
    streams, memory = device_lanes(db)
    assert device_lane_counts(compiled_tl) == {**streams, **memory}
    assert streams == {"gpu0 s7": 1352} and memory == {"gpu0 mem": 2 + 48}
    by_kind = events_by_lane_kind(compiled_tl)
    ranges = db.execute("select count(*) from NVTX_EVENTS where eventType in (59, 60) and end >= start").fetchone()[0]
    calls, threads = db.execute("select count(*), count(distinct globalTid) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    assert by_kind["ranges"] == ranges == 6 and by_kind["launches"] == calls == 2726
    # a launch lane a thread: the worker's main thread, autograd's, and one of a second process (5 calls)
    assert sum(lane.kind == "launches" for lane in compiled_tl.lanes) == threads == 3


def test_compiled_two_steps_each_from_its_forward_range(dbs, compiled_tl):
    db = dbs[0]
    windows = step_windows(db)
    forwards = db.execute("select count(*) from NVTX_EVENTS where eventType = 59 and text = 'forward'").fetchone()[0]
    origin = round(compiled_tl.origin_us * 1000)
    steps = compiled_tl.ranks[0].steps
    assert len(steps) == len(windows) == forwards == 2
    for step, (lo, hi) in zip(steps, windows):
        assert abs(step.start - (lo - origin)) <= 1 and abs(step.end - (hi - origin)) <= 1
    # the 1st step's forward range holds a cuModuleLoad for each of the 26 Triton kernels, before any kernel ran
    names = compiled_tl.names
    loads = sum(int(((lane.index.starts >= steps[0].start) & (lane.index.starts < steps[1].start)
                     & (lane.names == names.index("cuModuleLoad"))).sum())
                for lane in compiled_tl.lanes if lane.kind == "launches")
    triton = db.execute(f"select count(distinct value) from ({KERNEL_NAMES} where s.value like 'triton%')")
    first_kernel = db.execute("select min(start) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    load_end = db.execute("select max(r.end) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId "
                          "where s.value = 'cuModuleLoad'").fetchone()[0]
    assert loads == triton.fetchone()[0] == 26 and load_end < first_kernel


def test_compiled_busy_share_and_gaps_of_the_second_step(dbs, compiled_tl, merged):
    """Over step 2's window: the GPU's busy share and every idle gap, from the union of the file's kernels, copies and
    memsets (the device's busy time, as core.timeline.model counts it)."""
    db = dbs[0]
    lo, hi = step_windows(db)[1]
    union = busy_in(db, lo, hi, merged)
    busy = sum(b - a for a, b in union)
    edges = [lo, *(x for interval in union for x in interval), hi]
    idle = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2) if edges[i + 1] > edges[i]]
    longest = max(idle, key=lambda g: g[1] - g[0])
    origin = round(compiled_tl.origin_us * 1000)
    step = compiled_tl.step(2)
    assert (step.start, step.end) == (lo - origin, hi - origin)
    assert compiled_tl.busy_share(0, step.start, step.end) == pytest.approx(busy / (hi - lo), abs=1e-6)
    gs, ge = compiled_tl.gaps(0, step.start, step.end)
    gaps = list(zip(gs.tolist(), ge.tolist()))
    assert len(gaps) == len(idle) == 701
    assert all(abs(s + origin - a) <= 1 and abs(e + origin - b) <= 1 for (s, e), (a, b) in zip(gaps, idle))
    assert longest[1] - longest[0] == 2_506_459 and round(busy / (hi - lo), 3) == 0.148   # launch-bound


def test_compiled_the_first_steps_forward_range_is_almost_all_idle(dbs, compiled_tl, merged):
    """The 1st `forward` range (2.22 s: the Triton modules loading) against the file's own union of GPU activity."""
    db = dbs[0]
    b0, b1 = db.execute("select start, end from NVTX_EVENTS where eventType = 59 and text = 'forward' "
                        "order by start limit 1").fetchone()
    busy = sum(b - a for a, b in busy_in(db, b0, b1, merged))
    origin = round(compiled_tl.origin_us * 1000)
    assert compiled_tl.busy_share(0, b0 - origin, b1 - origin) == pytest.approx(busy / (b1 - b0), abs=1e-9)
    assert b1 - b0 == 2_220_655_266 and busy / (b1 - b0) < 0.001


@pytest.mark.parametrize("name, nth, innermost", [
    ("triton_per_fused__to_copy_add_index_mean_mul_pow_rsqrt_0", 1, "forward"),     # step 2's, the main thread's
    ("triton_poi_fused__unsafe_view_mul_silu_silu_backward_view_3", 13, "backward"),  # launched by autograd's thread
    ("triton_poi_fused__to_copy_t_9", 0, "forward"),                                  # a 15000-block grid
])
def test_compiled_a_triton_kernel_keeps_its_name_grid_block_and_range(dbs, compiled_tl, kernel_pair, name, nth,
                                                                    innermost):
    db = dbs[0]
    by_sql, on_timeline = kernel_pair
    _, start, *dims, launched, thread, label = by_sql(db, name, nth)
    chain = [t for (t,) in db.execute(
        "select text from NVTX_EVENTS where eventType = 59 and globalTid = ? and start <= ? and end > ? "
        "order by start, end desc", (thread, launched, launched))]
    k = on_timeline(compiled_tl, label, start)
    assert k.name == name and k.grid == tuple(dims[:3]) and k.block == tuple(dims[3:])
    assert chain == [innermost] and k.phase == innermost


# --- the same compiled step under the torch profiler ------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace_events():
    with gzip.open(TRACE, "rt", encoding="utf-8") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def trace_tl():
    return load_timeline([TRACE])


def test_trace_lanes_and_their_counts_match_the_traces_events(trace_events, trace_tl):
    cats = Counter(e["cat"] for e in trace_events)
    streams = Counter(f"gpu{e['args']['device']} s{e['args']['stream']}" for e in trace_events if e["cat"] == "kernel")
    memory = Counter(f"gpu{e['args']['device']} mem" for e in trace_events if e["cat"] in ("gpu_memcpy", "gpu_memset"))
    assert device_lane_counts(trace_tl) == {**streams, **memory}
    assert streams == {"gpu0 s7": 1352} and memory == {"gpu0 mem": 2 + 48}
    by_kind = events_by_lane_kind(trace_tl)
    assert by_kind["ranges"] == cats["user_annotation"] == 57 and by_kind["gpu_ranges"] == cats["gpu_user_annotation"] == 6
    assert by_kind["launches"] == cats["cuda_runtime"] + cats["cuda_driver"] == 358 + 1316
    assert not any(e["name"].startswith("ProfilerStep#") for e in trace_events if e["cat"] == "user_annotation")
    assert len(trace_tl.ranks[0].steps) == sum(e["name"] == "forward" for e in trace_events
                                               if e["cat"] == "user_annotation") == 2


def test_trace_triton_kernels_keep_their_names_grid_and_block_as_in_the_nsys_capture(trace_events, trace_tl, dbs):
    triton = [e for e in trace_events if e["cat"] == "kernel" and e["name"].startswith("triton_")]
    lane = trace_tl.lane("r0 gpu0 s7")
    names = [trace_tl.names[int(code)] for code in lane.names]
    assert Counter(n for n in names if n.startswith("triton_")) == Counter(e["name"] for e in triton)
    assert len(triton) == 710 and len({e["name"] for e in triton}) == 26
    # the nsys capture of the same spec ran the same Triton kernels, as many of each
    assert Counter(e["name"] for e in triton) == Counter(n for (n,) in dbs[0].execute(
        f"{KERNEL_NAMES} where s.value like 'triton%'"))
    first = min(triton, key=lambda e: e["ts"])
    origin = trace_tl.origin_us
    position = int(lane.index.starts.searchsorted(round((first["ts"] - origin) * 1000) - 1))
    k = trace_tl.kernel(lane.key, position)
    assert k.name == first["name"] == "triton_per_fused__to_copy_add_index_mean_mul_pow_rsqrt_0"
    assert list(k.grid) == first["args"]["grid"] and list(k.block) == first["args"]["block"]
    assert k.phase.split(" > ")[0] == "forward"


# --- eager DDP on two GPUs under nsys: each rank's export, loaded together -------------------------------------------

def test_ddp_one_lane_group_a_rank_with_its_own_devices_lanes(dbs, ddp_tl):
    assert [r.rank for r in ddp_tl.ranks] == [0, 1]
    for rank, db in enumerate(dbs[1:]):
        streams, memory = device_lanes(db)
        lanes = {lane.label: len(lane) for lane in ddp_tl.lanes if lane.rank == rank and lane.kind in ("kernels", "memory")}
        assert lanes == {**streams, **memory}
        assert streams == {f"gpu{rank} s7": 3813, f"gpu{rank} s17": 37} and memory == {f"gpu{rank} mem": 520 + 98}
        ranges = db.execute("select count(*) from NVTX_EVENTS where eventType in (59, 60) and end >= start").fetchone()[0]
        assert sum(len(x) for x in ddp_tl.lanes if x.rank == rank and x.kind == "ranges") == ranges == 217
        assert ddp_tl.rank(rank).device == f"gpu{rank}" and len(ddp_tl.rank(rank).steps) == len(step_windows(db)) == 2
    keys = [lane.key for lane in ddp_tl.lanes]
    assert len(keys) == len(set(keys)) and {"r0 gpu0 s17", "r1 gpu1 s17"} <= set(keys)


def test_ddp_the_nccl_kernels_run_on_a_stream_of_their_own_and_are_communication(dbs, ddp_tl):
    communication = CATEGORIES.index("communication")
    for rank, db in enumerate(dbs[1:]):
        nccl = db.execute("select k.streamId, count(*), sum(s.value like 'ncclDevKernel_AllReduce%'), "
                          "sum(s.value like 'ncclDevKernel_Broadcast%') from CUPTI_ACTIVITY_KIND_KERNEL k "
                          "join StringIds s on s.id = k.demangledName where s.value like '%nccl%' "
                          "group by k.streamId").fetchall()
        others = {s for (s,) in db.execute("select distinct k.streamId from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s "
                                           "on s.id = k.demangledName where s.value not like '%nccl%'")}
        assert len(nccl) == 1 and nccl[0][0] not in others
        stream, count, all_reduce, broadcast = nccl[0]
        assert (count, all_reduce, broadcast) == (37, 36, 1)   # 18 all-reduces a step
        lane = ddp_tl.lane(f"r{rank} gpu{rank} s{stream}")
        assert len(lane) == count and set(lane.cats.tolist()) == {communication}
        assert all(communication not in x.cats for x in ddp_tl.kernel_lanes(rank) if x.key != lane.key)


def test_ddp_the_two_sessions_are_put_on_one_clock(dbs, ddp_tl):
    """Each export's times count from its own session's start: rank 1's began 48.8 ms before rank 0's. On one clock,
    every interval is its file's time plus its session's distance from the earlier one; and each collective, which
    ends when both ranks have their sums, ends on both GPUs within 12 us (48.8 ms apart were the two not aligned)."""
    bases = [session_start(db) for db in dbs[1:]]
    assert bases[0] - bases[1] == 48_804_022
    origin = round(ddp_tl.origin_us * 1000)
    ends = []
    for rank, db in enumerate(dbs[1:]):
        shift = bases[rank] - min(bases) - origin
        for (stream,) in db.execute("select distinct streamId from CUPTI_ACTIVITY_KIND_KERNEL").fetchall():
            want = np.array(db.execute("select start, end from CUPTI_ACTIVITY_KIND_KERNEL where streamId = ? "
                                       "order by start", (stream,)).fetchall(), dtype=np.int64) + shift
            lane = ddp_tl.lane(f"r{rank} gpu{rank} s{stream}")
            assert len(lane) == len(want)
            assert np.abs(lane.index.starts - want[:, 0]).max() <= 1 and np.abs(lane.index.ends - want[:, 1]).max() <= 1
        ends.append(ddp_tl.lane(f"r{rank} gpu{rank} s17").index.ends)
    apart = abs(ends[0] - ends[1])
    assert len(apart) == 37 and int(apart.max()) == 11_263


@pytest.mark.parametrize("rank, share", [(0, 0.174), (1, 0.852)])
def test_ddp_the_steps_and_the_second_ones_busy_share_match_each_ranks_sql(dbs, ddp_tl, merged, rank, share):
    """Rank 1's GPU waits inside its NCCL kernels for rank 0's: busy, by the device's own count."""
    db = dbs[1 + rank]
    shift = session_start(db) - min(session_start(d) for d in dbs[1:]) - round(ddp_tl.origin_us * 1000)
    windows = step_windows(db)
    for step, (lo, hi) in zip(ddp_tl.rank(rank).steps, windows, strict=True):
        assert abs(step.start - (lo + shift)) <= 1 and abs(step.end - (hi + shift)) <= 1
    lo, hi = windows[1]
    busy = sum(b - a for a, b in busy_in(db, lo, hi, merged))
    step = ddp_tl.step(2, rank)
    assert ddp_tl.busy_share(rank, step.start, step.end) == pytest.approx(busy / (hi - lo), abs=1e-6)
    assert round(busy / (hi - lo), 3) == share


def test_ddp_an_nsys_jobs_record_opens_both_ranks_exports(paths, tmp_path):
    """A two-rank `--profile nsys` job lists each rank's .nsys-rep (rank 0's, its tables, then rank 1's, as the job's
    record does); `nsys stats` leaves each rank's SQLite beside its capture, and the timeline takes one a rank."""
    record = store.load(FIXTURES / "nsys_perfconsole" / "h200_2.7B_compiled_nsys_run.json")
    for rank in (0, 1):
        shutil.copy(paths[1 + rank], tmp_path / f"profile-rank{rank}.sqlite")
    record.profile.files = [str(tmp_path / "profile-rank0.nsys-rep"), str(tmp_path / "profile-rank0_cuda_gpu_kern_sum.csv"),
                            str(tmp_path / "profile-rank1.nsys-rep")]
    traces = record_traces(record)
    assert traces == [(0, tmp_path / "profile-rank0.sqlite"), (1, tmp_path / "profile-rank1.sqlite")]
    tl = load_timeline([p for _, p in traces], [r for r, _ in traces])
    assert [r.device for r in tl.ranks] == ["gpu0", "gpu1"]
    assert {lane.key for lane in tl.lanes if lane.kind == "kernels"} == {"r0 gpu0 s7", "r0 gpu0 s17", "r1 gpu1 s7",
                                                                         "r1 gpu1 s17"}

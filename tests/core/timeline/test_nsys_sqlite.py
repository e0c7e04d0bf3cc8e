"""The timeline of real Nsight Systems captures exported to SQLite (someone else's run, and perfconsole's own on an
H100: tests/fixtures/nsys_sqlite/SOURCE.txt), checked against figures this test computes with its own SQL on the
file: lanes and their counts, the steps, the GPU's busy share and idle gaps, the NVTX ranges, a kernel's name, grid
and the ranges open at its launch; the CLI and `import` on the file; and the one-line refusals of SQLite that is no
capture and of a capture with nothing timed in it."""
from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.cli.main import main
from perfconsole.core.timeline.captions import busy_lines, duration
from perfconsole.core.timeline.load import load_timeline
from perfconsole.core.timeline.model import TimelineError
from perfconsole.core.profiling.nsys_sqlite import trace_document
from perfconsole.core.timeline.source import record_traces

CAPTURE = Path(__file__).resolve().parents[2] / "fixtures" / "nsys_sqlite" / "dlprof_relu_nsys_profile.sqlite"


@pytest.fixture(scope="module")
def db():
    con = sqlite3.connect(f"file:{CAPTURE}?mode=ro", uri=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def tl():
    return load_timeline([CAPTURE])


def test_one_lane_a_stream_and_one_for_copies_and_memsets(db, tl):
    streams = Counter({f"gpu{d} s{s}": n for d, s, n in db.execute(
        "select deviceId, streamId, count(*) from CUPTI_ACTIVITY_KIND_KERNEL group by deviceId, streamId")})
    memory = sum(db.execute(f"select count(*) from CUPTI_ACTIVITY_KIND_{t}").fetchone()[0] for t in ("MEMCPY", "MEMSET"))
    lanes = {lane.label: len(lane) for lane in tl.lanes if lane.kind in ("kernels", "memory")}
    assert lanes == {**streams, "gpu0 mem": memory}
    assert sum(streams.values()) == 59 and memory == 17


def test_every_nvtx_range_is_on_a_range_lane_and_every_runtime_call_on_a_launch_lane(db, tl):
    ranges = db.execute("select count(*) from NVTX_EVENTS where eventType in (59, 60) and end >= start").fetchone()[0]
    calls = db.execute("select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
    by_kind = Counter()
    for lane in tl.lanes:
        by_kind[lane.kind] += len(lane)
    assert by_kind["ranges"] == ranges == 166 and by_kind["launches"] == calls == 321
    assert any(lane.kind == "ranges" and lane.depth >= 2 for lane in tl.lanes)  # aten::conv2d > convolution > ...


def test_busy_share_and_gaps_match_the_union_of_the_gpu_activity(db, tl, merged):
    gpu = [(a, b) for t in ("KERNEL", "MEMCPY", "MEMSET")
           for a, b in db.execute(f"select start, end from CUPTI_ACTIVITY_KIND_{t}")]
    union = merged(gpu)
    first, last = union[0][0], union[-1][1]
    busy = sum(b - a for a, b in union)
    gaps = [(a[1], b[0]) for a, b in zip(union, union[1:]) if b[0] - a[1] >= 50_000]   # 50 us, in ns
    origin_ns = round(tl.origin_us * 1000)
    t0, t1 = first - origin_ns, last - origin_ns
    assert tl.busy_share(0, t0, t1) == pytest.approx(busy / (last - first), abs=1e-6)
    gs, ge = tl.gaps(0, t0, t1, 50_000)
    assert len(gs) == len(gaps) > 0
    for (a, b), s, e in zip(gaps, gs.tolist(), ge.tolist()):
        assert abs(s + origin_ns - a) <= 1 and abs(e + origin_ns - b) <= 1


def test_a_kernel_keeps_its_name_grid_and_the_range_open_at_its_launch(db, tl):
    name, grid, block, launched, lane_label = db.execute(
        "select s.value, k.gridX, k.blockX, r.start, 'gpu' || k.deviceId || ' s' || k.streamId "
        "from CUPTI_ACTIVITY_KIND_KERNEL k "
        "join StringIds s on s.id = k.demangledName join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId "
        "order by k.start limit 1").fetchone()
    lane = next(lane for lane in tl.lanes if lane.kind == "kernels" and lane.label == lane_label)
    first = tl.kernel(lane.key, 0)
    assert first.name == name and "implicit_convolve_sgemm" in name
    assert first.grid[0] == grid and first.block[0] == block
    # the innermost NVTX range open on the launching thread when the runtime call began, by the file's own SQL
    inner = db.execute("select text from NVTX_EVENTS where eventType = 59 and start <= ? and end >= ? "
                       "order by start desc limit 1", (launched, launched)).fetchone()[0]
    assert first.phase.split(" > ")[-1] == inner
    doc = trace_document(CAPTURE)
    k = next(e for e in doc["traceEvents"] if e["cat"] == "kernel" and e["name"] == name)
    assert k["args"]["grid"][0] == grid and k["args"]["block"][0] == block


def test_the_cli_draws_the_capture(capsys):
    assert main(["timeline", str(CAPTURE), "--width", "60", "--ascii"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith(("gpu0 s", "gpu0 mem", "ranges"))]
    assert len(rows) >= 3 and all(len(line) == len(rows[0]) for line in rows)
    assert any(line.startswith("gpu0 busy ") for line in out)


def test_sqlite_that_is_no_capture_and_a_capture_with_nothing_timed_are_refused_in_one_line(tmp_path, capsys):
    other = tmp_path / "notes.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("create table notes (text)")
    assert main(["timeline", str(other)]) == 2
    err = capsys.readouterr().err
    assert "not an Nsight Systems SQLite export" in err and err.count("\n") == 1
    empty = tmp_path / "empty.sqlite"
    with sqlite3.connect(empty) as con:   # the export's own tables, none of the timed ones
        con.execute("create table StringIds (id integer, value text)")
        con.execute("create table TARGET_INFO_SESSION_START_TIME (utcEpochNs integer)")
    with pytest.raises(TimelineError, match="no kernels, copies, NVTX ranges or CUDA calls"):
        load_timeline([empty])


def test_an_import_of_the_export_sums_its_kernels_and_opens_in_the_timeline(db, tmp_path, capsys):
    """`perfconsole import X.sqlite`: the kernel table is the export's kernels summed by name (the file's own SQL),
    with no nsys on the machine; the saved record draws its timeline from the export it names."""
    assert main(["import", str(CAPTURE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = doc["tables"]["cuda_gpu_kern_sum"]
    count, total = db.execute("select count(*), sum(end - start) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    names = db.execute("select count(distinct demangledName) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert len(rows) == names and sum(r["instances"] for r in rows) == count == 59
    assert sum(r["total_time_ns"] for r in rows) == total
    saved = tmp_path / "imported.json"
    assert main(["import", str(CAPTURE), "--save", str(saved)]) == 0
    capsys.readouterr()
    assert main(["timeline", str(saved), "--width", "50", "--ascii"]) == 0
    assert any(line.startswith("gpu0 s7") for line in capsys.readouterr().out.splitlines())


def test_an_nsys_runs_record_finds_the_export_beside_its_capture_or_names_the_command(tmp_path):
    """A `--profile nsys` run (a real record of one, its files moved here): `nsys stats` leaves profile.sqlite
    beside profile.nsys-rep, and the timeline takes it; without it, the one line names the export command."""
    record = store.load(Path(__file__).resolve().parents[2] / "fixtures" / "nsys_perfconsole"
                        / "h200_2.7B_compiled_nsys_run.json")
    assert record.profile.profiler == "nsys"
    rep = tmp_path / "profile.nsys-rep"
    rep.write_bytes(b"")  # the capture itself is not read: its SQLite export is
    record.profile.files = [str(rep), *record.profile.files[1:]]
    with pytest.raises(TimelineError, match=r"no SQLite export of profile.nsys-rep .* nsys export --type sqlite -o "):
        record_traces(record)
    shutil.copy(CAPTURE, tmp_path / "profile.sqlite")
    assert record_traces(record) == [(0, tmp_path / "profile.sqlite")]
    assert len(load_timeline([p for _, p in record_traces(record)]).lanes) > 0


# --- perfconsole's own capture on an H100 (tests/fixtures/nsys_sqlite/SOURCE.txt): eager bf16 training of the small
# model on one GPU, 3 steps between cudaProfilerStart/Stop, NVTX ranges per phase and per layer; its backward ranges
# are opened by autograd's thread, the rest by the main one. Gzipped in the tree, decompressed here.
H100 = CAPTURE.parent / "h100_small_train_bf16_nsys.sqlite.gz"
DEVICE_TABLES = ("KERNEL", "MEMCPY", "MEMSET")


@pytest.fixture(scope="module")
def h100_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("h100_nsys") / "profile.sqlite"
    with gzip.open(H100) as src, path.open("wb") as out:
        shutil.copyfileobj(src, out)
    return path


@pytest.fixture(scope="module")
def h100_db(h100_path):
    con = sqlite3.connect(f"file:{h100_path}?mode=ro", uri=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def h100_tl(h100_path):
    return load_timeline([h100_path])


def test_h100_one_lane_a_kernel_stream_and_one_for_its_copies_and_memsets(h100_db, h100_tl):
    streams = {f"gpu{d} s{s}": n for d, s, n in h100_db.execute(
        "select deviceId, streamId, count(*) from CUPTI_ACTIVITY_KIND_KERNEL group by deviceId, streamId")}
    memory = {f"gpu{d} mem": n for d, n in h100_db.execute(
        "select deviceId, count(*) from (select deviceId from CUPTI_ACTIVITY_KIND_MEMCPY union all "
        "select deviceId from CUPTI_ACTIVITY_KIND_MEMSET) group by deviceId")}
    lanes = {lane.label: len(lane) for lane in h100_tl.lanes if lane.kind in ("kernels", "memory")}
    assert lanes == {**streams, **memory}
    assert streams == {"gpu0 s7": 5661} and memory == {"gpu0 mem": 78 + 147}


def test_h100_three_steps_each_from_its_forward_range_to_its_last_launched_activity(h100_db, h100_tl):
    """A step as core.timeline.load defines it, by SQL: from its `forward` range's start to the next one's (the last
    step to the end of the last range), widened to the first and last GPU activity launched in that span."""
    forwards = [s for (s,) in h100_db.execute(
        "select start from NVTX_EVENTS where eventType = 59 and text = 'forward' order by start")]
    last_range_end = h100_db.execute("select max(end) from NVTX_EVENTS where eventType in (59, 60)").fetchone()[0]
    origin = round(h100_tl.origin_us * 1000)
    steps = h100_tl.ranks[0].steps
    assert len(steps) == len(forwards) == 3
    for i, step in enumerate(steps):
        lo, hi = forwards[i], forwards[i + 1] if i + 1 < len(forwards) else 2 ** 62
        spans = [h100_db.execute(f"select min(d.start), max(d.end) from CUPTI_ACTIVITY_KIND_{t} d join "
                                 "CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = d.correlationId "
                                 "where r.start >= ? and r.start < ?", (lo, hi)).fetchone() for t in DEVICE_TABLES]
        first, last = min(a for a, _ in spans if a is not None), max(b for _, b in spans if b is not None)
        start, end = min(lo, first), max(hi if hi < 2 ** 62 else last_range_end, last)
        assert abs(step.start - (start - origin)) <= 1 and abs(step.end - (end - origin)) <= 1


def test_h100_busy_share_and_longest_gap_of_the_second_backward(h100_db, h100_tl, merged):
    """Over the 2nd `backward` range's span: the GPU's busy share and its longest idle gap, from the union of the
    kernels, copies and memsets the file holds (the device's busy time, as core.timeline.model counts it)."""
    b0, b1 = h100_db.execute("select start, end from NVTX_EVENTS where eventType = 59 and text = 'backward' "
                             "order by start limit 1 offset 1").fetchone()
    union = merged([(max(a, b0), min(b, b1)) for t in DEVICE_TABLES for a, b in h100_db.execute(
        f"select start, end from CUPTI_ACTIVITY_KIND_{t} where end > ? and start < ?", (b0, b1))])
    busy = sum(b - a for a, b in union)
    edges = [b0, *(x for interval in union for x in interval), b1]
    idle = [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2) if edges[i + 1] > edges[i]]
    longest = max(idle, key=lambda g: g[1] - g[0])
    origin = round(h100_tl.origin_us * 1000)
    t0, t1 = b0 - origin, b1 - origin
    assert h100_tl.busy_share(0, t0, t1) == pytest.approx(busy / (b1 - b0), abs=1e-6)
    gs, ge = h100_tl.gaps(0, t0, t1)
    gaps = list(zip(gs.tolist(), ge.tolist()))
    assert len(gaps) == len(idle) == 1183
    assert all(abs(s + origin - a) <= 1 and abs(e + origin - b) <= 1 for (s, e), (a, b) in zip(gaps, idle))
    s, e = max(gaps, key=lambda g: g[1] - g[0])
    assert abs(s + origin - longest[0]) <= 1 and abs(e + origin - longest[1]) <= 1
    assert longest[1] - longest[0] == 128_322 and round(busy / (b1 - b0), 3) == 0.168   # a small model: launch-bound
    # the caption says the same: the share, then the longest gap first
    share_line, gap_line = busy_lines(h100_tl, 0, t0, t1)[:2]
    assert f"busy {busy / (b1 - b0) * 100:.1f} % of the window" in share_line
    assert gap_line.startswith(f"  gap {duration(longest[1] - longest[0])} at ")


@pytest.mark.parametrize("pattern, nth, innermost", [
    ("%flash_fprop%", 13, "sdpa"),                     # step 2, layer 1's attention, launched by the main thread
    ("%flash_bprop%", 13, "backward"),                 # launched by autograd's thread
    ("%DeviceRadixSort%", 1, "cub::DeviceRadixSort"),  # a range named by textId, inside backward
    ("%FusedAdam%", 9, "optimizer_step"),             # ran 0.6 ms after its launch, the range closed by then
])
def test_h100_a_kernel_keeps_its_name_grid_block_and_the_ranges_open_on_its_launching_thread(
        h100_db, h100_tl, kernel_pair, pattern, nth, innermost):
    by_sql, on_timeline = kernel_pair
    name, start, *dims, launched, thread, label = by_sql(h100_db, pattern, nth, like=True)
    # the NVTX ranges open on the launching thread when its runtime call began, outermost first
    chain = [t for (t,) in h100_db.execute(
        "select coalesce(n.text, (select value from StringIds where id = n.textId)) from NVTX_EVENTS n "
        "where n.eventType = 59 and n.globalTid = ? and n.start <= ? and n.end > ? order by n.start, n.end desc",
        (thread, launched, launched))]
    k = on_timeline(h100_tl, label, start)
    assert k.name == name and k.grid == tuple(dims[:3]) and k.block == tuple(dims[3:])
    assert chain[-1] == innermost and k.phase == " > ".join(chain)


def test_h100_an_import_sums_the_exports_kernels(h100_db, h100_path, capsys):
    assert main(["import", str(h100_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["tables"]["cuda_gpu_kern_sum"]
    count, total, names = h100_db.execute(
        "select count(*), sum(end - start), count(distinct demangledName) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    assert len(rows) == names == 49 and sum(r["instances"] for r in rows) == count == 5661
    assert sum(r["total_time_ns"] for r in rows) == total == 25_739_842

"""A real `perfconsole run --profile nsys` of `small`, ctx 256, train mode, on the GPU machine.

Run there with:  python -m pytest -m gpu tests/core/profiling/test_nsys_gpu.py -v
Skipped cleanly where there is no CUDA GPU or no nsys (see perfconsole.core.profiling.locate).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.profiling.analyses import forward_check, phase_shares
from perfconsole.core.profiling.locate import find_nsys

pytestmark = pytest.mark.gpu


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_nsys_run_small_ctx256_train(tmp_path: Path) -> None:
    nsys = find_nsys(os.environ.get("PERFCONSOLE_NSYS"))
    if nsys is None:
        pytest.skip("nsys not found (--nsys, PERFCONSOLE_NSYS, PATH, /opt/nvidia, /usr/local/cuda*)")
    snap = tmp_path / "run.json"
    cmd = [sys.executable, "-m", "perfconsole.core.cli.main", "run", "--size", "small", "--ctx", "256",
           "--mode", "train", "--device", "cuda", "--warmup", "3", "--steps", "10", "--profile", "nsys",
           "--nsys", nsys.path, "--json", "--save", str(snap), "--out-dir", str(tmp_path / "prof")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert proc.stdout == snap.read_text()  # --json prints the snapshot --save writes
    steps = doc["data"]["steps"]
    assert len(steps) == 10

    record = store.load(snap)
    assert record.profile is not None and record.profile.profiler == "nsys"
    # Like with like: the NVTX forward of the profiled steps (a host interval) against the host's own issue
    # of the forward in those same steps. The quiet steps' forward is shorter by the profiler's own cost
    # (per-layer ranges on an eager, host-bound step), which the overhead reports as a ratio instead; and the
    # forward's GPU span is shorter when the GPU is still busy with the step before as the host begins it
    # (one H200 run: a 20.38 ms range against 18.25 ms on the GPU's clock).
    overhead = record.profile.overhead
    assert overhead["profiled_steps"] == 10 and overhead["quiet_steps"] == 10
    timed_forward_ms = overhead["profiled_host_forward_ms"]
    assert timed_forward_ms is not None
    assert overhead["profiled_phase_ms"].keys() == {"forward", "backward", "optimizer"}
    tables = record.profile.tables
    assert {"cuda_gpu_kern_sum", "nvtx_sum"} <= set(tables), record.profile.warnings
    assert any(f.endswith(".nsys-rep") for f in record.profile.files)
    assert all(Path(f).exists() for f in record.profile.files)

    nvtx = {r["range"]: r for r in tables["nvtx_sum"]}
    # The capture range holds only the measured steps: no warm-up forward ranges leak in.
    assert nvtx["forward"]["instances"] == len(steps)
    check = forward_check(tables, timed_forward_ms, steps=len(steps))
    assert check is not None
    assert check.within(0.10), check.to_dict()

    if "nvtx_kern_sum" in tables:
        phases = {p.phase: p for p in phase_shares(tables)}
        assert phases["forward"].categories[0].category == "matmul"

    # The run opens in the timeline: `nsys stats` left profile.sqlite beside the capture, the record finds it, and
    # every kernel the export holds is on a kernel lane; step 2's kernels are the export's own kernels in its span
    # (by its SQL, not by the timeline's index).
    import sqlite3

    from perfconsole.core.cli.main import main as cli
    from perfconsole.core.timeline.load import load_timeline
    from perfconsole.core.timeline.source import record_traces

    traces = record_traces(record, snap)
    assert len(traces) == 1 and traces[0][1].suffix == ".sqlite", traces
    tl = load_timeline([traces[0][1]])
    con = sqlite3.connect(f"file:{traces[0][1]}?mode=ro", uri=True)
    try:
        kernels = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        assert sum(len(lane) for lane in tl.lanes if lane.kind == "kernels") == kernels > 0
        assert len(tl.ranks[0].steps) == len(steps)
        step = tl.step(2)
        origin = round(tl.origin_us * 1000)
        in_step = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL where start >= ? and start < ?",
                              (step.start + origin, step.end + origin)).fetchone()[0]
    finally:
        con.close()
    drawn = sum(int(((lane.index.starts >= step.start) & (lane.index.starts < step.end)).sum())
                for lane in tl.lanes if lane.kind == "kernels")
    assert drawn == in_step > 100, (drawn, in_step)
    assert cli(["timeline", str(snap), "--step", "2", "--width", "100"]) == 0

"""The per-step exchange of a data-parallel job: a step's fields survive the trip, and posting a step never waits
for another rank's host (two real gloo ranks, one of them late)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from perfconsole.core import events as ev
from perfconsole.core.measure.step_exchange import pack, unpack


def test_a_step_comes_back_as_it_went_none_and_types_kept():
    step = ev.Step(index=7, warmup=True, total_ms=12.5, forward_ms=3.25, backward_ms=None, optimizer_ms=1.0,
                   loss=None, host_ms=11.0, rank=3)
    back = ev.Step(**unpack(pack(step)))
    assert back == step
    assert isinstance(back.index, int) and isinstance(back.rank, int) and back.warmup is True


LATE_S = 1.5
# One rank of the test's job, a process of its own (no multiprocessing: its resource tracker would outlive the test).
RANK = """
import json, sys, time
from datetime import timedelta
import torch.distributed as dist
from perfconsole.core import events as ev
from perfconsole.core.measure.step_exchange import StepExchange
rank, store, out, late = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2, timeout=timedelta(seconds=60))
ex = StepExchange(dist.new_group(backend="gloo"), rank, 2)
waits, got = [], []
for i in range(3):
    if rank == 1 and i == 1:
        time.sleep(late)  # this rank's host is late with step 1
    t = time.perf_counter()
    got += ex.post(ev.Step(index=i, warmup=False, total_ms=10.0 + rank, forward_ms=1.0, rank=rank))
    waits.append(time.perf_counter() - t)
got += ex.flush()
dist.destroy_process_group()
with open(out, "w") as f:
    json.dump({"waits": waits, "got": got}, f)
"""


@pytest.mark.e2e
def test_rank_0_posts_without_waiting_for_a_late_rank_and_gets_every_step(tmp_path):
    outs = [tmp_path / f"rank{r}.json" for r in (0, 1)]
    procs = [subprocess.Popen([sys.executable, "-c", RANK, str(r), str(tmp_path / "store"), str(outs[r]), str(LATE_S)])
             for r in (0, 1)]
    try:
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    rank0, rank1 = (json.loads(o.read_text()) for o in outs)
    # Rank 0 posts step 1 at once although rank 1 sends it 1.5 s later (a blocking gather would wait here).
    assert rank0["waits"][1] < LATE_S / 3, rank0["waits"]
    assert [[s["index"] for s in everyone] for everyone in rank0["got"]] == [[0, 0], [1, 1], [2, 2]]
    assert [s["total_ms"] for s in rank0["got"][0]] == [10.0, 11.0]
    assert rank1["got"] == [None, None, None]  # other ranks get nothing back but the count

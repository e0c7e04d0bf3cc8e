"""The per-step exchange of a data-parallel job: a step's fields survive the trip, and posting a step never waits
for another rank's host (two real gloo ranks, one of them late)."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from perfconsole.core import events as ev
from perfconsole.core.measure.step_exchange import StepExchange, pack, unpack


def test_a_step_comes_back_as_it_went_none_and_types_kept():
    step = ev.Step(index=7, warmup=True, total_ms=12.5, forward_ms=3.25, backward_ms=None, optimizer_ms=1.0,
                   loss=None, host_ms=11.0, rank=3)
    back = ev.Step(**unpack(pack(step)))
    assert back == step
    assert isinstance(back.index, int) and isinstance(back.rank, int) and back.warmup is True


LATE_S = 1.5


def _rank(rank: int, world: int, path: str, out: dict) -> None:
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    ex = StepExchange(dist.new_group(backend="gloo"), rank, world)
    waits, got = [], []
    for i in range(3):
        if rank == 1 and i == 1:
            time.sleep(LATE_S)  # this rank's host is late with step 1
        t = time.perf_counter()
        got += ex.post(ev.Step(index=i, warmup=False, total_ms=10.0 + rank, forward_ms=1.0, rank=rank))
        waits.append(time.perf_counter() - t)
    got += ex.flush()
    out[rank] = (waits, got)
    dist.destroy_process_group()


@pytest.mark.e2e
def test_rank_0_posts_without_waiting_for_a_late_rank_and_gets_every_step(tmp_path):
    out = mp.Manager().dict()
    mp.spawn(_rank, args=(2, str(tmp_path / "store"), out), nprocs=2, join=True)
    waits0, got0 = out[0]
    # Rank 0 posts step 1 at once although rank 1 sends it 1.5 s later (a blocking gather would wait here).
    assert waits0[1] < LATE_S / 3, waits0
    assert [[s["index"] for s in everyone] for everyone in got0] == [[0, 0], [1, 1], [2, 2]]
    assert [[s["total_ms"] for s in everyone] for everyone in got0][0] == [10.0, 11.0]
    assert out[1][1] == [None, None, None]  # other ranks get nothing back but the count

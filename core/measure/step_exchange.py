"""Every rank's step to rank 0 without holding any rank back: the exchange behind a data-parallel job's steps.

A blocking gather after each step (`gather_object`) makes every rank wait for the slowest one's host before it may
queue its next step: the ranks march in lockstep on the host as well as on the GPU, and a rank whose host is late
(its step's issue, rank 0's events) leaves the others' GPUs waiting for their next forward. On 4x H100 that cost the
2.7B compiled job 9.6 % of its step against the same program with no exchange (docs/results/four_gpus_h100.md).

Here a step's numbers travel as one float64 tensor in a gather posted without waiting (`async_op=True`) on the
job's gloo group, whose own thread carries it; rank 0 reads a step's gather only when the next step's is posted, a
step later, so by then every rank has long sent it, and the other ranks never wait on it at all before the end.
`flush()` waits for the last ones. Fields that are None travel as NaN, which no step field holds otherwise (a NaN
loss is None already: core.measure.pipeline).
"""
from __future__ import annotations

import dataclasses
import math
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from perfconsole.core import events as ev

FIELDS = tuple(f.name for f in dataclasses.fields(ev.Step))
INTS = ("index", "rank")


def pack(step: ev.Step) -> torch.Tensor:
    """The step's fields as float64, in FIELDS' order; None as NaN."""
    return torch.tensor([math.nan if (v := getattr(step, n)) is None else float(v) for n in FIELDS],
                        dtype=torch.float64)


def unpack(row: torch.Tensor) -> dict[str, Any]:
    """A packed step back to its fields (bool for warmup, int for index and rank, None for NaN)."""
    out: dict[str, Any] = {}
    for name, v in zip(FIELDS, row.tolist()):
        if math.isnan(v):
            out[name] = None
        elif name == "warmup":
            out[name] = bool(v)
        else:
            out[name] = int(v) if name in INTS else v
    return out


class StepExchange:
    """Posts each step's gather at once; hands back the steps whose gathers are complete (rank 0: every rank's
    fields, in rank order; other ranks: None in their place)."""

    def __init__(self, group: Any, rank: int, world: int) -> None:
        self.group, self.rank, self.world = group, rank, world
        self.pending: list[tuple[Any, torch.Tensor, list[torch.Tensor] | None]] = []

    def post(self, step: ev.Step) -> list[list[dict[str, Any]] | None]:
        """Send this step; the gathers before it, complete (waited for: posted a step ago or earlier)."""
        ready = self.flush()
        mine = pack(step)
        rows = [torch.empty_like(mine) for _ in range(self.world)] if self.rank == 0 else None
        work = dist.gather(mine, rows, dst=0, group=self.group, async_op=True)
        self.pending.append((work, mine, rows))
        return ready

    def flush(self, timeout: timedelta | None = None) -> list[list[dict[str, Any]] | None]:
        """Every gather still in flight, complete, in the order they were posted. With `timeout` (a rank that
        failed sends what it had posted before it ends), a gather not complete by then raises."""
        done, self.pending = self.pending, []
        out: list[list[dict[str, Any]] | None] = []
        for work, _mine, rows in done:
            if timeout is None:
                work.wait()
            else:
                work.wait(timeout)
            out.append(None if rows is None else [unpack(r) for r in rows])
        return out

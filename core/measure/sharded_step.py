"""ZeRO-2 inside DDP (`zero2`): the gradients reduce-scattered, AdamW on each rank's slice, the parameters gathered.

DDP still finds each gradient bucket ready during the backward; its comm hook (`ShardedStep.hook`) divides the
bucket by the world size, as DDP's own all-reduce does, and reduce-scatters it in place, so each rank holds the
averaged gradients of its 1/world slice of every bucket: half the bytes of the all-reduce, started at the same
moment. After the backward (`step`), AdamW steps each rank's slice of each bucket's parameters (a flat copy of the
bucket's parameters the rank keeps, of which the slice is a view), in GROUPS groups of buckets, one AdamW call each;
each group's all-gathers of the stepped parameters are queued as soon as it is stepped (so they run beside the groups
still being stepped), and the gathered parameters are copied into the model in one call. A bucket's last `numel % world` elements belong to no
slice: they are all-reduced (every bucket's together, one small collective) and every rank steps them.

What it buys: a world-th of AdamW's work and of its state a rank, and half the backward's bytes; what it costs: the
all-gather after the step, and a flat copy of the parameters on every rank. The gradients outside a rank's slice
stay unreduced (a gradient norm over the model would read them: the job clips nothing).

DDP rebuilds its buckets after the first step (in the order the gradients became ready), so the first step runs as
plain DDP does: its all-reduce, then AdamW over every parameter; each slice then starts from that AdamW's state (its
step count and moments), and the full AdamW's state is freed. A job's losses are those of plain DDP with AdamW, to
the rounding of a reduce-scatter against an all-reduce (tests/core/launch/test_data_parallel.py).

In DDP's steps without communication (`no_sync`: the job's compute-only steps, core.measure.job) no bucket reaches
the hook; the step then steps every slice on the gradients its bucket holds and copies the parameters without
gathering them: the same work, none of the communication.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# torch 2.13 names them *_single and deprecates the old names; the GPU machine's 2.11 has the old ones alone
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
Key = tuple[int, ...]  # a bucket's parameters, by identity: DDP's bucket indices change when it rebuilds them


@dataclass
class _Slice:
    params: list[torch.nn.Parameter]
    flat: torch.Tensor                # the bucket's parameters, flat, in the bucket's order
    views: list[torch.Tensor]         # each parameter's place in `flat`
    mine: torch.nn.Parameter          # this rank's slice of `flat`
    tail: torch.nn.Parameter | None   # the elements past the last whole slice, stepped by every rank
    lo: int
    hi: int
    end: int                          # where the slices end and the tail begins

    @property
    def pieces(self) -> list[torch.nn.Parameter]:
        return [self.mine] + ([self.tail] if self.tail is not None else [])


# The slices are stepped in this many groups, one AdamW each, each group's all-gathers queued once it is stepped: few
# optimizer calls for the host (one a bucket cost it 15 ms a step at 2.7B), and gathers that start while later
# groups are stepped.
GROUPS = 8


class ShardedStep:
    """DDP's comm hook and the optimizer step of ZeRO-2 (see the module doc). `full` is AdamW over every parameter
    (core.measure.converters.make_optimizer sets it, with `make` to build each slice's AdamW the same way); it steps
    the first step and clears the gradients every step. `timer` (core.measure.data_parallel.CommTimer), where given,
    also times the all-gathers while it is on."""

    def __init__(self, rank: int, world: int, timer: Any = None) -> None:
        self.rank, self.world, self.timer = rank, world, timer
        self.full: torch.optim.Optimizer | None = None
        self.make: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer] | None = None
        self.started = False
        self._seen: list[tuple[Key, list[torch.nn.Parameter], torch.Tensor]] = []
        self._slices: dict[Key, _Slice] = {}
        self._groups: list[tuple[list[_Slice], torch.optim.Optimizer]] = []

    # DDP's comm hook: no annotations (DDP checks a hook's against dist.GradBucket and Future[Tensor])
    def hook(self, state, bucket):  # noqa: ANN001, ANN201
        buf = bucket.buffer()
        buf.div_(self.world)
        if not self.started:
            return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])
        params = bucket.parameters()
        self._seen.append((tuple(id(p) for p in params), params, buf))
        n = buf.numel() // self.world
        work = _REDUCE_SCATTER(buf[self.rank * n:(self.rank + 1) * n], buf[:n * self.world], async_op=True)
        if buf.device.type != "cuda":  # gloo's reduce-scatter gives no future: wait, and hand back a done one
            work.wait()
            done: torch.futures.Future = torch.futures.Future()
            done.set_result(buf)
            return done
        return work.get_future().then(lambda f: buf)

    def zero_grad(self, set_to_none: bool = True) -> None:
        assert self.full is not None
        self.full.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        assert self.full is not None and self.make is not None, "make_optimizer sets the full AdamW"
        if not self.started:
            self.full.step()
            self.started = True
            return
        seen, self._seen = self._seen, []
        if not self._groups:
            if not seen:  # no_sync before any sharded step: AdamW over every parameter, as the first step
                self.full.step()
                return
            self._build(seen)
        for key, _, buf in seen:
            sl = self._slices.get(key)
            if sl is None:
                raise RuntimeError("zero2: DDP's buckets changed after the slices were made (they are made once, "
                                   "after DDP rebuilt its buckets at its second step)")
            sl.mine.grad = buf[sl.lo:sl.hi]
            if sl.tail is not None:
                sl.tail.grad = buf[sl.end:]
        if not seen:  # a step without communication (no_sync): the same work on the gradients as they hold
            for _, optimizer in self._groups:
                optimizer.step()
            self._copy()
            return
        tails = [buf[sl.end:] for key, _, buf in seen if (sl := self._slices[key]).tail is not None]
        if tails:
            joined = torch.cat(tails)
            dist.all_reduce(joined)
            torch._foreach_copy_(tails, list(joined.split([t.numel() for t in tails])))
        timing = self.timer is not None and self.timer.on
        works = []
        for slices, optimizer in self._groups:
            optimizer.step()
            for sl in slices:
                start = self.timer.mark() if timing else None
                works.append((start, _ALL_GATHER(sl.flat[:sl.end], sl.flat[sl.lo:sl.hi], async_op=True)))
        for start, work in works:
            work.wait()
            if timing:
                self.timer.add(start, self.timer.mark())
        self._copy()

    def _copy(self) -> None:
        """Every bucket's gathered parameters into the model's, in one call."""
        slices = [sl for group, _ in self._groups for sl in group]
        torch._foreach_copy_([p.detach() for sl in slices for p in sl.params], [v for sl in slices for v in sl.views])

    def _build(self, seen: list[tuple[Key, list[torch.nn.Parameter], torch.Tensor]]) -> None:
        """Each bucket's slice, from the parameters as they are and AdamW's state over them (its step count and
        moments), then the groups' AdamW; the full AdamW's state is freed."""
        assert self.full is not None and self.make is not None
        state: dict[torch.nn.Parameter, dict[str, Any]] = {}
        order = []
        for key, params, buf in seen:
            if not all(p in self.full.state for p in params):
                raise RuntimeError("zero2: a bucket's parameters have no AdamW state (DDP's buckets changed after "
                                   "its first step)")
            n = buf.numel() // self.world
            lo, hi, end = self.rank * n, (self.rank + 1) * n, n * self.world
            flat = torch.cat([p.detach().reshape(-1) for p in params])
            sl = _Slice(params, flat, _views(flat, params), torch.nn.Parameter(flat[lo:hi]),
                        torch.nn.Parameter(flat[end:]) if end < flat.numel() else None, lo, hi, end)
            states = [self.full.state[p] for p in params]
            for piece, a, b in ((sl.mine, lo, hi), (sl.tail, end, flat.numel())):
                if piece is not None:
                    state[piece] = {"step": states[0]["step"].clone(), **{
                        k: torch.cat([st[k].reshape(-1) for st in states])[a:b].clone()
                        for k in ("exp_avg", "exp_avg_sq")}}
            self._slices[key] = sl
            order.append(sl)
        self.full.state.clear()  # the slices hold the moments now
        size = -(-len(order) // GROUPS)
        for i in range(0, len(order), size):
            group = order[i:i + size]
            optimizer = self.make([piece for sl in group for piece in sl.pieces])
            for piece in (piece for sl in group for piece in sl.pieces):
                optimizer.state[piece] = state[piece]
            self._groups.append((group, optimizer))


def _views(flat: torch.Tensor, params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    views, off = [], 0
    for p in params:
        views.append(flat[off:off + p.numel()].view_as(p))
        off += p.numel()
    return views

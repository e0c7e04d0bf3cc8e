"""Inside one rank of a data-parallel job (started by torchrun): the process group, the DDP or FSDP
wrapper, the time each step spends in collectives, and the gloo group on which rank 0 hears from the
others.

Only torch.distributed is used: NCCL between GPUs (each rank on the GPU its LOCAL_RANK names), gloo
on the CPU. The per-step timings of every rank reach rank 0 on a separate gloo group, after the step's
timing is complete and without any rank waiting for another (core.measure.step_exchange), so the
exchange is never inside a timed region and never shares a stream or a communicator with the gradients;
what is gathered once (`gather`: the comm steps, the allocator's retries, the overlap) uses `gather_object`.

What `comm_ms` measures (DDP): a communication hook wraps DDP's own all-reduce (or its bf16
compression hook) and marks, for every gradient bucket, the moment the bucket's gradients are ready
and the moment its all-reduce has finished: CUDA events on the GPU (the end event is recorded on a
stream that waits for the collective), a monotonic clock on the CPU (gloo runs the collective on its
own thread; the end mark is taken in the future's callback). `comm_ms` is the length of the union of
those intervals in the step: the time at least one collective was in flight, including a bucket's
wait behind an earlier one, and overlapping the backward's compute.

The hook's events and callbacks are not free, and they change how the all-reduce overlaps the
backward, so the timed program is the user's: the quiet steps run DDP exactly as configured (no hook
at all with the default all-reduce; the bf16 hook alone with `--comm-hook bf16`), and the timer is
switched on only for steps of its own afterwards (core.measure.job). How much of the communication the
step actually waited for is measured from the quiet steps (`exposed_comm_ms`, against no-sync steps).
FSDP's collectives run inside FSDP and have no such hook; their time comes from a profile, and
`comm_ms` stays None.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from perfconsole.core.settings import RunSpec

# The test-only fault injection of a rank: PERFCONSOLE_RANK_FAULT=<rank>:<kind>:<step> applies
# worker.fault_hook's <kind>:<step> on that rank alone (a crash or OOM on one rank of the job).
RANK_FAULT_ENV = "PERFCONSOLE_RANK_FAULT"
TIMEOUT = timedelta(minutes=10)


@dataclass
class Rank:
    rank: int
    world_size: int
    local_rank: int
    device: torch.device
    exchange: Any  # the gloo group the per-step timings travel on

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def from_env() -> tuple[int, int, int] | None:
    """(rank, world size, local rank) from torchrun's environment; None outside torchrun."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0"))


def init(spec: RunSpec) -> Rank:
    """Join the job: NCCL on the GPU this rank owns, gloo on the CPU."""
    env = from_env()
    if env is None:
        raise RuntimeError(f"nproc {spec.nproc} needs torchrun's environment (RANK, WORLD_SIZE); "
                           "start it through perfconsole run --nproc")
    rank, world, local = env
    if world != spec.nproc:
        raise RuntimeError(f"torchrun started {world} processes for a spec of nproc {spec.nproc}")
    if spec.device == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        # NCCL's streams at high priority where the spec asks (spec.nccl_priority); torch's default otherwise.
        options = dist.ProcessGroupNCCL.Options(is_high_priority_stream=spec.nccl_priority)
        dist.init_process_group("nccl", timeout=TIMEOUT, device_id=device, pg_options=options)
        exchange = dist.new_group(backend="gloo")
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=TIMEOUT)
        exchange = dist.new_group(backend="gloo")  # its own group: never queued behind gradients
    return Rank(rank, world, local, device, exchange)


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


class CommTimer:
    """The union of the gradient buckets' [ready, all-reduced] intervals in one step (see the module doc).
    While `on` is False a wrapped hook calls the inner hook and nothing else."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.on = False
        self.registered = False  # whether a hook of this timer's is on the DDP module
        self.lock = threading.Lock()
        self.spans: list[tuple[Any, Any]] = []
        self.origin: Any = None

    def begin(self) -> None:
        with self.lock:
            self.spans = []
        self.origin = self.mark()

    def mark(self) -> Any:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def add(self, start: Any, end: Any) -> None:
        """A collective's interval of this step from outside a bucket's hook (ZeRO-2's all-gathers: core.measure.
        sharded_step), as two marks."""
        with self.lock:
            self.spans.append((start, end))

    def wrap(self, inner: Callable[[Any, Any], torch.futures.Future]) -> Callable[[Any, Any], torch.futures.Future]:
        # No annotations: DDP checks a hook's annotations against dist.GradBucket and Future[Tensor],
        # and this module's are strings.
        def timed(state, bucket):  # noqa: ANN001, ANN202
            if not self.on:
                return inner(state, bucket)
            start = self.mark()
            fut = inner(state, bucket)

            def done(f: torch.futures.Future) -> torch.Tensor:
                # On CUDA the callback's current stream already waits for the collective, so an
                # event recorded here completes when the bucket is all-reduced.
                end = self.mark()
                with self.lock:
                    self.spans.append((start, end))
                return f.value()

            return fut.then(done)
        return timed

    def step_ms(self) -> float | None:
        """Call after the step has synchronised. None when no bucket was reduced (no-sync steps)."""
        with self.lock:
            spans = list(self.spans)
        if not spans:
            return None
        if self.cuda:
            for _, end in spans:  # buckets may finish out of the order their callbacks ran in
                end.synchronize()
            ms = [(self.origin.elapsed_time(a), self.origin.elapsed_time(b)) for a, b in spans]
        else:
            ms = [((a - self.origin) * 1e3, (b - self.origin) * 1e3) for a, b in spans]
        return union_ms(ms)


def union_ms(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def wrap_model(par: Any, model: torch.nn.Module, rank: Rank) -> tuple[torch.nn.Module, CommTimer | None]:
    """DDP (with the parallel section's bucket size, bucket views, hook, ZeRO-2 and compile treatment) or FSDP around
    the model. DDP's timer starts off; with the bf16 hook it wraps that hook from the start (DDP takes one
    hook, once). No timer for FSDP, nor for DDP's Python reducer (optimize_ddp python_reducer)."""
    if par.parallel == "ddp":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel as DDP

        # Read by DDP's constructor and by torch.compile: set before either (spec.OPTIMIZE_DDP).
        torch._dynamo.config.optimize_ddp = par.optimize_ddp
        kw: dict[str, Any] = {"gradient_as_bucket_view": par.grad_as_bucket_view}
        if par.bucket_mb is not None:
            kw["bucket_cap_mb"] = par.bucket_mb
        ddp = DDP(model, device_ids=[rank.local_rank] if rank.device.type == "cuda" else None, **kw)
        if par.optimize_ddp == "python_reducer":
            # DDP's Python reducer all-reduces each gradient as compiled autograd traces the backward
            # (core.measure.converters: the step's context): the collectives run inside the compiled graph,
            # where no bucket hook can time them
            return ddp, None
        timer = CommTimer(rank.device.type == "cuda")
        if par.comm_hook == "bf16":
            ddp.register_comm_hook(dist.group.WORLD, timer.wrap(default_hooks.bf16_compress_hook))
            timer.registered = True
        elif par.zero2:
            # ZeRO-2's hook is the program itself (its reduce-scatters): on from the first step, timed when the timer
            # is; the optimizer (core.measure.converters.make_optimizer) finds it on the DDP module
            from perfconsole.core.measure.sharded_step import ShardedStep

            ddp.sharded_step = ShardedStep(rank.rank, rank.world_size, timer)
            ddp.register_comm_hook(dist.group.WORLD, timer.wrap(ddp.sharded_step.hook))
            timer.registered = True
        return ddp, timer
    return _fsdp(model, par.reshard, par.fsdp_bf16), None


def time_comm(ddp: torch.nn.Module, timer: CommTimer) -> None:
    """Switch the timer on. With DDP's own all-reduce (no hook in the quiet steps) its Python twin,
    `allreduce_hook`, is registered now, wrapped by the timer."""
    if not timer.registered:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        ddp.register_comm_hook(dist.group.WORLD, timer.wrap(default_hooks.allreduce_hook))  # type: ignore[operator]
        timer.registered = True
    timer.on = True


def _fsdp(model: torch.nn.Module, reshard: bool = True, bf16: bool = False) -> torch.nn.Module:
    """FSDP2 (`fully_shard`) per Transformer block, then the root: the blocks' all-gathers and
    reduce-scatters can overlap the neighbouring blocks' compute. With `reshard` False a block keeps its
    parameters gathered from its forward to its backward (no second all-gather; ZeRO-2's memory). With
    `bf16` FSDP's mixed precision gathers the parameters and reduce-scatters the gradients in bf16; the
    fp32 shards stay the master copy that AdamW updates. FSDP1 (its SHARD_GRAD_OP for `reshard` False,
    its MixedPrecision for `bf16`) where FSDP2 is missing."""
    blocks = list(getattr(model, "layers", []))
    low = torch.bfloat16 if bf16 else None
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy

        kinds = {type(b) for b in blocks}
        return FSDP(model, auto_wrap_policy=ModuleWrapPolicy(kinds) if kinds else None, use_orig_params=True,
                    sharding_strategy=ShardingStrategy.FULL_SHARD if reshard else ShardingStrategy.SHARD_GRAD_OP,
                    mixed_precision=MixedPrecision(param_dtype=low, reduce_dtype=low) if bf16 else None)
    policy = MixedPrecisionPolicy(param_dtype=low, reduce_dtype=low)
    for block in blocks:
        fully_shard(block, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


@contextlib.contextmanager
def no_sync(model: torch.nn.Module) -> Iterator[None]:
    """DDP without its gradient all-reduce, for the compute-only steps that price exposed communication."""
    with model.no_sync():  # type: ignore[operator]
        yield


def gather(rank: Rank, payload: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Every rank's payload on rank 0 (in rank order), None elsewhere; on the gloo exchange group."""
    out: list[Any] | None = [None] * rank.world_size if rank.is_main else None
    dist.gather_object(payload, out, dst=0, group=rank.exchange)
    return out


def rank_fault() -> str | None:
    """This rank's share of PERFCONSOLE_RANK_FAULT (`<kind>:<step>`), or None."""
    text = os.environ.get(RANK_FAULT_ENV)
    env = from_env()
    if not text or env is None:
        return None
    who, _, fault = text.partition(":")
    return fault if who.isdigit() and int(who) == env[0] else None

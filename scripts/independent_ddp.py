"""An independent data-parallel step, to check perfconsole's DDP figures: run it under torchrun.

It shares only the model definition with perfconsole: the process group, DDP, AdamW (fused), the
loss and the timed loop are written out here again. Steps run back to back with one CUDA event pair
around each, one step in flight: the host queues step k+1, then waits for step k's end (as a loop that
reads each step's loss a step late does, and as perfconsole queues its steps; left free to run further
ahead, this script ran out of memory in its warm-up at 2.7B on 4x H100, where perfconsole's job did not:
docs/results/four_gpus_h100.md); a rank's
step is the event pair's time and the job's step is the slowest rank's. Then NCCL's all-reduce of a
1 GiB buffer alone gives the link's bus bandwidth (the figure nccl-tests calls busbw: algorithm
bandwidth x 2(n-1)/n), and an all-reduce of this model's gradients alone gives their cost without
compute beside them. Rank 0 prints one JSON line.

    torchrun --nproc-per-node 2 scripts/independent_ddp.py --size 2.7B --ctx 512 --batch 4 [--bf16-hook]

`--no-wrap` runs the model without DDP or FSDP (the one-process program a job's weak scaling divides by;
with one process it is what `perfconsole run` times); `--compile` compiles the model after it is wrapped,
as perfconsole does (DDP's graph split at its buckets: torch's default `optimize_ddp`).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import collections
import json
import os
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM


def allreduce_ms(t: torch.Tensor, reps: int = 5) -> float:
    """Fastest of `reps` all-reduces of `t`, CUDA events, after one warm-up."""
    dist.all_reduce(t)
    best = float("inf")
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dist.all_reduce(t)
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b))
    return best


class ShardedStep:
    """ZeRO-2 written out in DDP's comm hook: each bucket's gradients (divided by the world, as DDP's all-reduce
    hook does) are reduce-scattered in place, so a rank holds the reduced gradients of its 1/world slice of each
    bucket; after the backward, fused AdamW steps that slice of the parameters (a flat copy of the bucket the rank
    keeps), in `groups` AdamW calls over groups of buckets (or one a bucket), each group's all-gathers queued as soon
    as it is stepped, and the gathered parameters are copied into the model. A bucket's last numel % world elements are all-reduced and
    stepped by every rank. The first step runs as plain DDP with AdamW over all parameters: DDP rebuilds its buckets
    after it, and each slice starts from that AdamW's state."""

    def __init__(self, full: torch.optim.Optimizer, rank: int, world: int, groups: int = 8) -> None:
        self.full, self.rank, self.world, self.on, self.groups = full, rank, world, False, groups
        self.grouped: list = []   # (the buckets' slices, one AdamW over them), when stepped in `groups` groups
        self.seen: list = []      # this step's buckets: (parameters, flat gradient buffer)
        self.slices: dict = {}    # bucket's parameters' ids -> (params, flat params, its optimizer, shard, tail)

    def hook(self, state, bucket):  # noqa: ANN001, ANN201
        buf = bucket.buffer()
        buf.div_(self.world)
        if not self.on:
            return dist.all_reduce(buf, async_op=True).get_future().then(lambda f: f.value()[0])
        self.seen.append((bucket.parameters(), buf))
        n = buf.numel() // self.world
        work = dist.reduce_scatter_tensor(buf[self.rank * n:(self.rank + 1) * n], buf[:n * self.world],
                                          async_op=True)
        if dist.get_backend() != "nccl":  # gloo's reduce-scatter has no future: wait, then hand back a done one
            work.wait()
            done: torch.futures.Future = torch.futures.Future()
            done.set_result(buf)
            return done
        return work.get_future().then(lambda f: buf)

    def _build(self, params: list, buf: torch.Tensor) -> tuple:
        n = buf.numel() // self.world
        lo, hi, main = self.rank * n, (self.rank + 1) * n, n * self.world
        flat = torch.cat([q.detach().reshape(-1) for q in params])
        shard = torch.nn.Parameter(flat[lo:hi])
        tail = torch.nn.Parameter(flat[main:]) if main < flat.numel() else None
        opt = torch.optim.AdamW([shard] + ([tail] if tail is not None else []), lr=1e-4, fused=True)
        for piece, a, b in ((shard, lo, hi), (tail, main, flat.numel())):
            if piece is None:
                continue
            st = [self.full.state[q] for q in params]
            opt.state[piece] = {"step": st[0]["step"].clone(),
                                **{k: torch.cat([s[k].reshape(-1) for s in st])[a:b].clone()
                                   for k in ("exp_avg", "exp_avg_sq")}}
        views, off = [], 0
        for q in params:
            views.append(flat[off:off + q.numel()].view_as(q))
            off += q.numel()
        return params, flat, views, opt, shard, tail, (lo, hi, main)

    def step(self) -> None:
        if not self.on:
            self.full.step()
            self.on = True
            return
        seen, self.seen = self.seen, []
        built = [self.slices.get(tuple(id(q) for q in ps)) or self._build(ps, buf) for ps, buf in seen]
        for (ps, _), b in zip(seen, built):
            self.slices[tuple(id(q) for q in ps)] = b
        self.full.state.clear()  # the slices hold the moments now
        tails = [buf[b[6][2]:] for (_, buf), b in zip(seen, built) if b[5] is not None]
        if tails:
            joined = torch.cat(tails)
            dist.all_reduce(joined)
            torch._foreach_copy_(tails, list(joined.split([t.numel() for t in tails])))
        for (_, buf), (_ps, _flat, _views, _opt, shard, tail, (lo, hi, main)) in zip(seen, built):
            shard.grad = buf[lo:hi]
            if tail is not None:
                tail.grad = buf[main:]
        if self.groups and not self.grouped:  # one AdamW a group of buckets, each taking its buckets' state
            size = -(-len(built) // self.groups)
            for i in range(0, len(built), size):
                part = built[i:i + size]
                pieces = [q for b in part for q in (b[4], b[5]) if q is not None]
                opt = torch.optim.AdamW(pieces, lr=1e-4, fused=True)
                for b in part:
                    for q in (b[4], b[5]):
                        if q is not None:
                            opt.state[q] = b[3].state[q]
                self.grouped.append((part, opt))
        works = []
        for part, opt in self.grouped or [([b], b[3]) for b in built]:
            opt.step()
            for _ps, flat, _views, _opt, _shard, _tail, (lo, hi, main) in part:
                works.append(dist.all_gather_into_tensor(flat[:main], flat[lo:hi], async_op=True))
        for work in works:
            work.wait()
        torch._foreach_copy_([q.detach() for b in built for q in b[0]], [v for b in built for v in b[2]])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="2.7B")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--bucket-mb", type=float, default=None)
    p.add_argument("--grad-as-bucket-view", action="store_true")
    p.add_argument("--bf16-hook", action="store_true")
    p.add_argument("--bf16-weights", action="store_true", help="parameters (so gradients) in bf16, as --weights bf16")
    p.add_argument("--nccl-high-priority", action="store_true",
                   help="NCCL's streams at high priority (ProcessGroupNCCL.Options.is_high_priority_stream)")
    p.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard per block and the root instead of DDP")
    p.add_argument("--no-reshard", action="store_true", help="FSDP: reshard_after_forward=False")
    p.add_argument("--fsdp-bf16", action="store_true", help="FSDP: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)")
    p.add_argument("--optimizer-in-hook", action="store_true",
                   help="DDP: each bucket's fused AdamW step runs as soon as its all-reduce ends (a comm hook's "
                        "callback, on a side stream), beside the rest of the backward; no optimizer step after it")
    p.add_argument("--shard-step", action="store_true",
                   help="DDP: ZeRO-2 in a comm hook (ShardedStep): gradients reduce-scattered, AdamW on each rank's "
                        "slice of each bucket, the parameters all-gathered after it")
    p.add_argument("--shard-groups", type=int, default=8,
                   help="with --shard-step: AdamW calls a step, each over a group of buckets' slices (0: one a bucket)")
    p.add_argument("--no-wrap", action="store_true", help="no DDP or FSDP: the plain model (one process)")
    p.add_argument("--compile", action="store_true", help="torch.compile the wrapped model")
    p.add_argument("--optimize-ddp", default="ddp_optimizer", choices=("ddp_optimizer", "no_optimization",
                                                                     "python_reducer"),
                   help="torch._dynamo.config.optimize_ddp with --compile (python_reducer: each step's forward and "
                        "backward under compiled autograd, torch.compile its compiler)")
    p.add_argument("--comm-reorder", action="store_true",
                   help="with --optimize-ddp python_reducer: inductor's compute/communication reordering "
                        "(reorder_for_compute_comm_overlap, the passes its config recommends that this torch has), "
                        "to start the fused all-reduces earlier in the backward's graph")
    p.add_argument("--memory-trace", action="store_true",
                   help="rank 0 prints the memory allocated after each warm-up step's forward, backward and "
                        "optimizer step (stderr, GiB), and DDP's bucket rebuild")
    p.add_argument("--exchange", action="store_true",
                   help="after each step's end, every rank's step time goes to rank 0 through gather_object on a gloo "
                        "group, one step late (as perfconsole's job does), to see what that exchange costs")
    p.add_argument("--gc-settle", action="store_true",
                   help="before the first step, freeze the objects that exist and space Python's collector's passes "
                        "as perfconsole's worker does (gc.freeze, thresholds 50,000/20/20): to see what that setting "
                        "is worth to a step the host paces")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    opts = dist.ProcessGroupNCCL.Options(is_high_priority_stream=a.nccl_high_priority)
    dist.init_process_group("nccl", device_id=dev, pg_options=opts)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    cfg = config_for(a.size, a.ctx)
    with torch.device(dev):
        model = TransformerLM(cfg, "sdpa")
    if a.bf16_weights:
        for q in model.parameters():
            q.data = q.data.to(torch.bfloat16)
    if a.no_wrap:
        ddp = model
    elif a.fsdp:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        low = torch.bfloat16 if a.fsdp_bf16 else None
        mp = MixedPrecisionPolicy(param_dtype=low, reduce_dtype=low)
        for block in model.layers:
            fully_shard(block, reshard_after_forward=not a.no_reshard, mp_policy=mp)
        ddp = fully_shard(model, mp_policy=mp)
    else:
        torch._dynamo.config.optimize_ddp = a.optimize_ddp
        kw = {"gradient_as_bucket_view": a.grad_as_bucket_view}
        if a.bucket_mb is not None:
            kw["bucket_cap_mb"] = a.bucket_mb
        ddp = DDP(model, device_ids=[local], **kw)
    if a.bf16_hook and not (a.fsdp or a.no_wrap):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(dist.group.WORLD, default_hooks.bf16_compress_hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=True)
    if a.optimizer_in_hook and not (a.fsdp or a.no_wrap):
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        per_bucket: dict[tuple[int, ...], torch.optim.Optimizer] = {}
        shared: collections.defaultdict = collections.defaultdict(dict)
        assert a.grad_as_bucket_view, "--optimizer-in-hook reads the gradients as views of the reduced bucket"

        def allreduce_then_step(state, bucket):  # noqa: ANN001, ANN202
            def step_bucket(fut):  # noqa: ANN001, ANN202
                # Keyed by the bucket's parameters: DDP rebuilds its buckets after the first step.
                key = tuple(id(q) for q in bucket.parameters())
                if key not in per_bucket:  # one state for all: a rebuilt bucket keeps its parameters' moments
                    per_bucket[key] = torch.optim.AdamW(bucket.parameters(), lr=1e-4, fused=True)
                    per_bucket[key].state = shared
                per_bucket[key].step()  # the gradients are views of the bucket just reduced
                return fut.value()
            return default_hooks.allreduce_hook(state, bucket).then(step_bucket)

        ddp.register_comm_hook(dist.group.WORLD, allreduce_then_step)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.0)  # zero_grad only: the steps ran in the hook
    sharded = None
    if a.shard_step and not (a.fsdp or a.no_wrap):
        assert a.grad_as_bucket_view, "--shard-step steps the reduced slices as views of DDP's buckets"
        sharded = ShardedStep(opt, rank, world, a.shard_groups)
        ddp.register_comm_hook(None, sharded.hook)
    if a.compile:
        ddp = torch.compile(ddp)
    g = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.ctx + 1), generator=g).to(dev)
    x, y = ids[:, :-1], ids[:, 1:]

    def mem(where: str) -> None:
        if a.memory_trace and rank == 0:
            torch.cuda.synchronize()
            print(f"memory {where}: allocated {torch.cuda.memory_allocated(dev) / 2**30:.2f} GiB, "
                  f"peak {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB", file=sys.stderr, flush=True)

    host: list[tuple[float, float, float]] = []  # the host's time to issue each step's forward, backward, optimizer

    reorder: list[str] = []
    if a.comm_reorder:
        if not (a.compile and a.optimize_ddp == "python_reducer"):
            sys.exit("--comm-reorder reorders a compiled graph's collectives: it needs --compile --optimize-ddp "
                     "python_reducer")
        import torch._inductor.comms as comms
        import torch._inductor.config as inductor_config

        reorder = [name for name in ("reorder_communication_preserving_peak_memory", "sink_waits_iterative",
                                     "reorder_communication_preserving_peak_memory") if hasattr(comms, name)]
        if not reorder:
            sys.exit(f"--comm-reorder: torch {torch.__version__} has none of the reordering passes")
        inductor_config.reorder_for_compute_comm_overlap = True
        inductor_config.reorder_for_compute_comm_overlap_passes = reorder
    if a.compile and a.optimize_ddp == "python_reducer":
        from torch._dynamo import compiled_autograd

        backend = torch.compile()
        around = lambda: compiled_autograd._enable(backend)  # noqa: E731
    else:
        around = contextlib.nullcontext

    def step(tag: str = "") -> None:
        opt.zero_grad(set_to_none=True)
        mem(f"{tag} zero_grad")
        t0 = time.perf_counter()
        with around():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = ddp(x)
                loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), y.reshape(-1))
            t1 = time.perf_counter()
            mem(f"{tag} forward")
            loss.backward()
        t2 = time.perf_counter()
        mem(f"{tag} backward")
        if sharded is not None:
            sharded.step()
        elif not a.optimizer_in_hook:
            opt.step()
        t3 = time.perf_counter()
        mem(f"{tag} optimizer")
        host.append(((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3))

    mem("built")
    if a.gc_settle:  # the same two calls as core/measure/gc_control.py's settle, written out: this script is independent
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    for w in range(a.warmup):
        step(f"warm-up {w + 1}")
        torch.cuda.synchronize()
    torch.cuda.synchronize()
    dist.barrier()
    host.clear()
    gloo = dist.new_group(backend="gloo") if a.exchange else None
    torch.cuda.reset_peak_memory_stats(dev)
    retries_before = torch.cuda.memory_stats(dev).get("num_alloc_retries", 0)
    marks = []
    # What the host gave this rank's issuing thread over its measured steps, read here without perfconsole's code:
    # its CPU seconds against the wall's and the scheduler's preemptions of it (resource.RUSAGE_THREAD).
    wall0, cpu0, usage0 = time.perf_counter(), time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)
    for i in range(a.steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        marks.append((s, e))
        if i:  # one step in flight: the host waits for the step before this one, as a loop that reads its loss
            marks[i - 1][1].synchronize()
            if gloo is not None:
                dist.gather_object({"step": i - 1, "ms": marks[i - 1][0].elapsed_time(marks[i - 1][1])},
                                   [None] * world if rank == 0 else None, dst=0, group=gloo)
    torch.cuda.synchronize()
    wall, cpu, usage = time.perf_counter() - wall0, time.thread_time() - cpu0, resource.getrusage(resource.RUSAGE_THREAD)
    mine = [s.elapsed_time(e) for s, e in marks]
    memory = {"alloc_retries": torch.cuda.memory_stats(dev).get("num_alloc_retries", 0) - retries_before,
              "peak_allocated_mib": torch.cuda.max_memory_allocated(dev) / 2**20,
              "thread_cpu_share": cpu / wall, "involuntary_switches": usage.ru_nivcsw - usage0.ru_nivcsw}
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    memory["host_ms"] = [statistics.median(h[k] for h in host) for k in range(3)]
    memories: list = [None] * world
    dist.all_gather_object(memories, memory)
    job = [max(r[i] for r in everyone) for i in range(a.steps)]

    opt = ddp = sharded = None  # AdamW's state and DDP's buckets freed (step() holds them too) before the buffers below
    torch.cuda.empty_cache()
    # FSDP's parameters are DTensors: their local shards, times the world
    n_params = sum((p.to_local() if hasattr(p, "to_local") else p).numel() for p in model.parameters())
    n_params *= world if a.fsdp else 1
    low = a.bf16_hook or a.bf16_weights or a.fsdp_bf16
    grads = torch.empty(n_params, dtype=torch.bfloat16 if low else torch.float32, device=dev)
    grads_ms = allreduce_ms(grads)
    grads_bytes = grads.numel() * grads.element_size()
    del grads
    gib = torch.empty(2**30 // 2, dtype=torch.bfloat16, device=dev)
    gib_ms = allreduce_ms(gib)
    factor = 2 * (world - 1) / world
    if rank == 0:
        print(json.dumps({
            "program": "independent_ddp", "size": a.size, "ctx": a.ctx, "batch_per_rank": a.batch, "world": world,
            "bucket_mb": a.bucket_mb, "grad_as_bucket_view": a.grad_as_bucket_view, "bf16_hook": a.bf16_hook,
            "bf16_weights": a.bf16_weights, "fsdp": a.fsdp, "no_wrap": a.no_wrap, "compile": a.compile, "optimize_ddp": a.optimize_ddp, "reshard": not a.no_reshard, "fsdp_bf16": a.fsdp_bf16,
            "nccl_high_priority": a.nccl_high_priority, "optimizer_in_hook": a.optimizer_in_hook,
            "shard_step": a.shard_step, "shard_groups": a.shard_groups if a.shard_step else None,
            "comm_reorder": reorder,
            "steps": a.steps, "median_step_ms": statistics.median(job), "job_step_ms": job,
            "rank_median_ms": [statistics.median(r) for r in everyone],
            "alloc_retries": [m["alloc_retries"] for m in memories], "exchange": a.exchange,
            "gc_settle": a.gc_settle,
            "host_issue_ms_fwd_bwd_opt": [[round(v, 2) for v in m["host_ms"]] for m in memories],
            "peak_allocated_mib": [round(m["peak_allocated_mib"], 1) for m in memories],
            "thread_cpu_share": [round(m["thread_cpu_share"], 4) for m in memories],
            "involuntary_switches": [m["involuntary_switches"] for m in memories],
            "grads_allreduce_ms": grads_ms, "grads_bytes": grads_bytes,
            "grads_busbw_gbps": grads_bytes * factor / grads_ms / 1e6,
            "link_busbw_gbps_1gib": 2**30 * factor / gib_ms / 1e6,
            "gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())),
            "comm_env": {k: v for k, v in sorted(os.environ.items())
                         if k.startswith(("NCCL_", "TORCH_NCCL_", "CUDA_DEVICE_MAX_CONNECTIONS"))},
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

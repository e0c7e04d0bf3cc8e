"""Data parallel's own cost on one GPU, where no link exists: what DDP or FSDP adds to a step before any
rank waits for another.

Run under torchrun with one process. It builds perfconsole's model and wraps it with perfconsole's own
code (core.measure.data_parallel.wrap_model: DDP with the given bucket size, bucket views and bf16 hook, or
FSDP2 per block, then the root), or not at all, and times train steps of fused AdamW under bf16 autocast.
Each timed step starts on an idle GPU (synchronised before), and two figures are read for it:
- the step: wall time from its start to the synchronise after it (ms);
- the issue time: wall time until the Python of the step returned, the GPU still working (ms).
Issue time near the step time means the GPU waited on the host (host-bound); far below it, the host
ran ahead. With one rank the collectives are local (FSDP's all-gathers and reduce-scatters are copies,
DDP's all-reduce has nothing to add), so what a wrap adds here over the unwrapped model is its own host
work and copies, not the link. Rank 0 prints one JSON line.

    torchrun --standalone --nproc-per-node 1 docs/results/probes/wrap_one_gpu.py --wrap fsdp [--bf16] [--no-reshard] [--compile]
    torchrun --standalone --nproc-per-node 1 docs/results/probes/wrap_one_gpu.py --wrap ddp [--bucket-mb MB] [--bucket-view] [--bf16-hook] [--compile]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from perfconsole.core.measure.data_parallel import Rank, wrap_model
from perfconsole.core.settings import RunSpec
from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="2.7B")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--wrap", choices=("none", "ddp", "fsdp"), default="fsdp")
    p.add_argument("--bucket-mb", type=float, default=None, help="DDP's bucket_cap_mb (perfconsole --bucket-mb)")
    p.add_argument("--bucket-view", action="store_true", help="DDP's gradient_as_bucket_view")
    p.add_argument("--bf16-hook", action="store_true", help="DDP's bf16_compress_hook (perfconsole --comm-hook bf16)")
    p.add_argument("--bf16", action="store_true", help="FSDP's bf16 mixed precision (perfconsole --fsdp-bf16)")
    p.add_argument("--no-reshard", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile the wrapped model, as perfconsole --compile")
    p.add_argument("--optimize-ddp", default=None, choices=("ddp_optimizer", "no_optimization"),
                   help="torch._dynamo.config.optimize_ddp for a compiled DDP model: ddp_optimizer (torch's "
                        "default) splits the graph at DDP's buckets, no_optimization compiles it whole")
    p.add_argument("--profile", action="store_true", help="after the timed steps, one more under torch.profiler: "
                   "the ops with the most host time (self CPU) and GPU time (self device) in the JSON")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    cfg = config_for(a.size, a.ctx)
    with dev:
        model = TransformerLM(cfg, "sdpa")
    if a.optimize_ddp:  # before DDP is built: its constructor reads the mode too
        torch._dynamo.config.optimize_ddp = a.optimize_ddp
    if a.wrap != "none":  # perfconsole's wrap, for a spec of one rank (a job's spec needs two or more)
        spec = RunSpec(size=a.size, ctx=a.ctx, batch=a.batch, precision="bf16", mode="train", device="cuda",
                       parallel=a.wrap, bucket_mb=a.bucket_mb, grad_as_bucket_view=a.bucket_view,
                       comm_hook="bf16" if a.bf16_hook else "none", reshard=not a.no_reshard, fsdp_bf16=a.bf16)
        model, _ = wrap_model(spec.section("parallel"), model, Rank(0, 1, 0, dev, None))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    if a.compile:  # the wrapped model, as perfconsole's bench compiles it
        model = torch.compile(model)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.ctx + 1), device=dev)
    x, y = ids[:, :-1], ids[:, 1:]

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1)).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    steps, issue, gpu = [], [], []
    for _ in range(a.steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s.record()
        step()
        e.record()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        steps.append((t2 - t0) * 1e3)
        issue.append((t1 - t0) * 1e3)
        gpu.append(s.elapsed_time(e))
    med = statistics.median
    top: dict = {}
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        avg = prof.key_averages()
        for key, attr in (("top_host", "self_cpu_time_total"), ("top_gpu", "self_device_time_total")):
            rows = sorted(avg, key=lambda e: getattr(e, attr, 0), reverse=True)[:15]
            top[key] = [(e.key, round(getattr(e, attr, 0) / 1e3, 2), e.count) for e in rows]
    print(json.dumps({
        "program": "wrap_one_gpu", "size": a.size, "ctx": a.ctx, "batch": a.batch, "wrap": a.wrap, "bf16": a.bf16,
        "reshard": not a.no_reshard, "bucket_mb": a.bucket_mb, "bucket_view": a.bucket_view, "bf16_hook": a.bf16_hook,
        "compile": a.compile, "optimize_ddp": a.optimize_ddp or str(torch._dynamo.config.optimize_ddp),
        "steps": a.steps,
        "median_step_ms": med(steps), "median_issue_ms": med(issue), "median_events_ms": med(gpu),
        "issue_share": med(issue) / med(steps), "step_ms": steps, "issue_ms": issue,
        "peak_alloc_mib": torch.cuda.max_memory_allocated(dev) / 2**20,
        "gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, **top,
    }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

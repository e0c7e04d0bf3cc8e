"""An independent timing of one training/inference step, to check perfconsole's own numbers.

It shares only the model definition with perfconsole (what is measured), not the timed loop: the
step is written out here again, and timed three ways: per step, one CUDA event pair around the whole
step and a wall clock between two synchronisations; then the same number of steps back to back, with
one synchronisation at each end (the mean). Prints one JSON line.

    python3 scripts/independent_timing.py --size small --ctx 512 --precision bf16 --mode train
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", default="small")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--mode", default="train")
    p.add_argument("--attention", default="naive")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    cfg = config_for(a.size, a.ctx)
    with dev:
        model = TransformerLM(cfg, a.attention)
    fn = torch.compile(model) if a.compile else model
    x = torch.randint(0, cfg.vocab_size, (a.batch, a.ctx), device=dev)
    y = torch.randint(0, cfg.vocab_size, (a.batch, a.ctx), device=dev)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True) if a.mode == "train" else None
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" and a.mode != "fwd" else None

    def step() -> None:
        if a.mode != "fwd":
            model.zero_grad(set_to_none=True)
        ctx = torch.autocast("cuda", dtype=dtype) if dtype else torch.autocast("cuda", enabled=False)
        with ctx, torch.set_grad_enabled(a.mode != "fwd"):
            out = fn(x)
            loss = F.cross_entropy(out.view(-1, out.shape[-1]).float(), y.view(-1))
        if a.mode == "fwd":
            return
        (scaler.scale(loss) if scaler else loss).backward()
        if opt is not None:
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    event_ms, wall_ms = [], []
    for _ in range(a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        wall_ms.append((time.perf_counter() - t0) * 1e3)
        event_ms.append(start.elapsed_time(end))
    # Back to back, as a training loop that reads nothing back runs: one synchronisation at each end,
    # the mean step is the wall time over the steps (what perfconsole's default, a step in flight, gives).
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    back_to_back_ms = (time.perf_counter() - t0) * 1e3 / a.steps
    print(json.dumps({"event_median_ms": statistics.median(event_ms), "wall_median_ms": statistics.median(wall_ms),
                      "back_to_back_mean_ms": back_to_back_ms, "event_ms": event_ms,
                      "gpu": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()

"""Where the optimizer's time can go: a compiled 2.7B bf16 train step with its AdamW run four ways.

    python3 docs/results/probes/overlap_probe.py VARIANT [--size 2.7B] [--steps 10]

VARIANT:
  full        torch.compile of the whole model, fused AdamW after the backward (today's fastest rung)
  blocks      each Transformer block compiled on its own, fused AdamW after the backward
  inbwd       blocks, and each parameter's fused AdamW run as soon as its gradient is accumulated
              (a post-accumulate-grad hook), on the same stream
  inbwd_side  the same, on a second CUDA stream, so the optimizer's memory traffic can run beside the
              rest of the backward's matmuls; the next step waits for that stream

One JSON line: mean step (ms) back to back over --steps after 5 warm-up steps (one synchronisation at
each end), per-phase medians from CUDA events in a second synchronised pass, and the losses of the
first 3 steps (the same seed in every variant, for the numerics).
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
    ap = argparse.ArgumentParser()
    ap.add_argument("variant", choices=["full", "blocks", "inbwd", "inbwd_side"])
    ap.add_argument("--size", default="2.7B")
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    cfg = config_for(a.size, 512)
    with dev:
        model = TransformerLM(cfg, "sdpa")
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (4, 513), generator=gen).to(dev)
    x, y = ids[:, :-1], ids[:, 1:]
    if a.variant == "full":
        fn = torch.compile(model)
    else:
        for block in model.layers:
            block.compile()
        fn = model
    side = torch.cuda.Stream() if a.variant == "inbwd_side" else None
    if a.variant.startswith("inbwd"):
        opts = {p: torch.optim.AdamW([p], lr=1e-4, fused=True) for p in model.parameters()}

        def hook(p: torch.Tensor) -> None:
            if side is None:
                opts[p].step()
                p.grad = None
                return
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                p.grad.record_stream(side)
                opts[p].step()
            p.grad = None

        for p in model.parameters():
            p.register_post_accumulate_grad_hook(hook)
        opt = None
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(marks: list | None = None) -> torch.Tensor:
        def mark() -> None:
            if marks is not None:
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                marks.append(e)
        if side is not None:  # the parameters the forward reads were written on the side stream
            torch.cuda.current_stream().wait_stream(side)
        mark()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = fn(x)
            loss = F.cross_entropy(out.view(-1, out.shape[-1]).float(), y.reshape(-1))
        mark()
        loss.backward()
        mark()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)
        mark()
        return loss

    losses = [step().item() for _ in range(3)]
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    mean_ms = (time.perf_counter() - t0) * 1e3 / a.steps
    phases = []
    for _ in range(a.steps):
        marks: list = []
        step(marks)
        torch.cuda.synchronize()
        phases.append([s.elapsed_time(e) for s, e in zip(marks, marks[1:])])
    med = [statistics.median(p[i] for p in phases) for i in range(3)]
    print(json.dumps({"variant": a.variant, "size": a.size, "mean_step_ms": round(mean_ms, 3),
                      "forward_ms": round(med[0], 3), "backward_ms": round(med[1], 3), "optimizer_ms": round(med[2], 3),
                      "losses": losses, "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                      "gpu": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()

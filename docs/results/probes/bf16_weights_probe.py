"""How much does a train step gain when the weights, gradients and AdamW state are bf16 instead of fp32?

One process, the same model and batch, compiled (default mode), sdpa, fused AdamW, bf16 autocast:
  fp32-weights: the program the ladder measures (fp32 parameters; autocast casts them for the matmuls)
  bf16-weights: the parameters cast to bf16 before the optimizer is built (no fp32 master copy)
Each variant: 3 warm-up steps, then STEPS steps back to back, timed by CUDA events around the loop
(synchronised once at the end) and by the host clock; the first losses of each are printed so the
numerics can be compared.

    python3 docs/results/probes/bf16_weights_probe.py --size 2.7B --steps 10
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from perfconsole.core.measure.bench import build_model
from perfconsole.core.settings import RunSpec


def variant(spec: RunSpec, bf16: bool, steps: int) -> tuple[float, float, list[float]]:
    torch.manual_seed(spec.seed)
    torch._dynamo.reset()
    model = build_model(spec, torch.device("cuda"))
    if bf16:
        model = model.to(torch.bfloat16)
    fwd = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator().manual_seed(spec.seed)
    ids = torch.randint(0, spec.vocab_size, (spec.batch, spec.ctx + 1), generator=gen).cuda()
    x, y = ids[:, :-1], ids[:, 1:]
    losses = []

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = fwd(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        losses.append(float(step()))
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    start.record()
    for _ in range(steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    host_ms = (time.perf_counter() - t0) * 1e3 / steps
    losses.append(float(loss))
    model = fwd = opt = None  # freed for the next variant (step() holds them too)
    torch.cuda.empty_cache()
    return start.elapsed_time(end) / steps, host_ms, losses


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="2.7B")
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    spec = RunSpec(size=a.size, ctx=512, batch=4, precision="bf16", mode="train", attention="sdpa", device="cuda")
    print(f"# bf16 weights probe: {a.size} ctx512 b4, compile, sdpa, fused AdamW, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}\n")
    print("| variant | mean step, CUDA events (ms) | mean step, host clock (ms) | losses (warm-up 0-2, last) |")
    print("| --- | --: | --: | --- |")
    rows = {}
    for bf16 in (False, True):
        name = "bf16-weights" if bf16 else "fp32-weights"
        ev, host, losses = variant(spec, bf16, a.steps)
        rows[name] = ev
        print(f"| {name} | {ev:.2f} | {host:.2f} | {', '.join(f'{v:.4f}' for v in losses)} |", flush=True)
    print(f"\nbf16-weights / fp32-weights: {rows['bf16-weights'] / rows['fp32-weights']:.3f}")


if __name__ == "__main__":
    main()

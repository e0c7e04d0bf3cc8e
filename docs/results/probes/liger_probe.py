"""Which liger-kernel swap breaks training, and does it need torch.compile to break?

Runs the same model (bf16 autocast, fused AdamW, one fixed batch) with each liger swap alone and all of
them, eager and compiled, and prints per case: the losses of the first steps, whether any gradient or
parameter is not finite after step 0, and the largest relative gradient difference at step 0 against
the plain model (with the parameter it is in). GPU only (liger's kernels are Triton).

    python3 docs/results/probes/liger_probe.py --size small --steps 4 > liger_probe.md
"""
from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

from perfconsole.core.measure.bench import build_model
from perfconsole.core.settings import RunSpec
from perfconsole.model.transformer import RMSNorm, SwiGLU

CASES = ("plain", "rms", "rms-copy", "swiglu", "ce", "ce-clone", "all", "all-fixed")


def swap(model: torch.nn.Module, case: str):
    from liger_kernel.transformers import LigerCrossEntropyLoss, LigerRMSNorm
    from liger_kernel.transformers.functional import liger_swiglu

    rms = case in ("rms", "rms-copy", "all", "all-fixed")
    in_place = case in ("rms", "all")
    glu = case in ("swiglu", "all", "all-fixed")
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if rms and isinstance(child, RMSNorm):
                fused = LigerRMSNorm(child.weight.shape[0], eps=child.eps, in_place=in_place)
                fused.weight = child.weight
                setattr(parent, name, fused)
            elif glu and isinstance(child, SwiGLU):
                child.forward = (lambda m: lambda x: m.w2(liger_swiglu(m.w1(x), m.w3(x))))(child)
    if case in ("ce", "all"):
        ce = LigerCrossEntropyLoss()
        return lambda logits, t: ce(logits.view(-1, logits.shape[-1]), t.reshape(-1))
    if case in ("ce-clone", "all-fixed"):
        ce = LigerCrossEntropyLoss()
        # The kernel writes the gradient into its input: give it a tensor nothing else holds.
        return lambda logits, t: ce(logits.view(-1, logits.shape[-1]).clone(), t.reshape(-1))
    return lambda logits, t: F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), t.reshape(-1))


def run(spec: RunSpec, case: str, compiled: bool, steps: int, ref_grads: dict | None):
    torch.manual_seed(spec.seed)
    torch._dynamo.reset()
    model = build_model(spec, torch.device("cuda"))
    loss_fn = swap(model, case)
    fwd = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator().manual_seed(spec.seed)
    ids = torch.randint(0, spec.vocab_size, (spec.batch, spec.ctx + 1), generator=gen).cuda()
    x, y = ids[:, :-1], ids[:, 1:]
    losses, grads, bad = [], {}, []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(fwd(x), y)
        loss.backward()
        if i == 0:
            for n, p in model.named_parameters():
                if p.grad is None:
                    bad.append(f"{n}: no grad")
                elif not torch.isfinite(p.grad).all():
                    bad.append(f"{n}: grad not finite")
                grads[n] = None if p.grad is None else p.grad.detach().float().clone()
        opt.step()
        if i == 0:
            bad += [f"{n}: param not finite" for n, p in model.named_parameters() if not torch.isfinite(p).all()]
        losses.append(float(loss))
    worst = ("-", 0.0)
    if ref_grads is not None:
        for n, g in grads.items():
            r = ref_grads.get(n)
            if g is None or r is None:
                continue
            rel = float((g - r).norm() / r.norm().clamp_min(1e-30))
            if rel > worst[1]:
                worst = (n, rel)
    return losses, grads, bad, worst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="small")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    spec = RunSpec(size=a.size, ctx=512, batch=4, precision="bf16", mode="train", attention="sdpa", device="cuda")
    print(f"# liger probe: {a.size} ctx512 b4 bf16 sdpa, fused AdamW, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}\n")
    print("| case | compiled | losses | not finite after step 0 | worst grad rel diff at step 0 (param) |")
    print("| --- | --- | --- | --- | --- |")
    ref = {}
    for compiled in (False, True):
        for case in a.cases.split(","):
            try:
                losses, grads, bad, worst = run(spec, case, compiled, a.steps, ref.get(compiled))
            except Exception as e:  # a case that cannot run is a row, not the end of the probe
                print(f"| {case} | {compiled} | error: {type(e).__name__}: {str(e)[:120]} | | |")
                continue
            if case == "plain":
                ref[compiled] = grads
            badtxt = "; ".join(bad[:3]) + (f" (+{len(bad) - 3})" if len(bad) > 3 else "") or "none"
            print(f"| {case} | {compiled} | {', '.join(f'{v:.4f}' for v in losses)} | {badtxt} "
                  f"| {worst[1]:.2e} ({worst[0]}) |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

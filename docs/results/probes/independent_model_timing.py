"""An independent timing of an hf: architecture's training step, to check `perfconsole run --model hf:...`.

It shares only the model's config with perfconsole (model.sources.hf.make_config: the same published shape,
random weights); the step is written out here: sdpa attention, bf16 autocast, fp32 weights, fused AdamW,
CUDA events around each whole step, steps back to back and read at the end. `--bf16-weights`, `--fp8`
(torchao's convert_to_float8_training on every nn.Linear whose dimensions divide by 16), `--compile`
(torch.compile; `--compile-mode reduce-overhead` for CUDA graphs), `--liger` (liger-kernel's own patch for
the architecture, its RoPE and SwiGLU, with its cross-entropy on the logits; its RMSNorm only without
--compile), `--sdpa-kernel` (the only attention kernel left on) and `--sdpa-causal` (no dense mask under
torch.compile) add those changes, written out here too, to
check a run with `--weights bf16 --fp8 --compile --compile-mode M --kernels liger --sdpa-kernel K --sdpa-causal --optimizer fused`. Prints one JSON line with the median; give
--against a run snapshot to compare medians (the ratio should be within 2 %).

    python3 docs/results/probes/independent_model_timing.py --model hf:llama --size 1B --ctx 2048 --batch 4 --against run.json
"""
from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F

from perfconsole.core.settings import RunSpec
from perfconsole.core.measure.model_build import request
from perfconsole.model.sources.hf import from_config, make_config


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="hf:llama")
    p.add_argument("--size", default="1B")
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--bf16-weights", action="store_true", help="parameters, gradients and AdamW state in bf16")
    p.add_argument("--fp8", action="store_true", help="torchao float8 training matmuls")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--compile-mode", default="default", help="torch.compile's mode (reduce-overhead: CUDA graphs)")
    p.add_argument("--liger", action="store_true", help="liger-kernel's RoPE, SwiGLU and cross-entropy")
    p.add_argument("--sdpa-kernel", default="auto", choices=("auto", "flash", "cudnn", "efficient", "math"),
                   help="the only scaled_dot_product_attention kernel left on (auto: torch's choice)")
    p.add_argument("--sdpa-causal", action="store_true",
                   help="transformers takes it that no batch is packed and nothing is exported: no dense mask under "
                   "torch.compile")
    p.add_argument("--against", default=None, help="a perfconsole run snapshot of the same spec")
    a = p.parse_args()
    dev = torch.device("cuda")
    if a.sdpa_causal:  # written out here, as perfconsole's --sdpa-causal does it
        import transformers.masking_utils as masking

        masking.is_torchdynamo_exporting = lambda: False
        masking.find_packed_sequence_indices = lambda position_ids: None
    if a.sdpa_kernel != "auto":  # written out here, as perfconsole's --sdpa-kernel does it
        torch.backends.cuda.enable_flash_sdp(a.sdpa_kernel == "flash")
        torch.backends.cuda.enable_cudnn_sdp(a.sdpa_kernel == "cudnn")
        torch.backends.cuda.enable_mem_efficient_sdp(a.sdpa_kernel == "efficient")
        torch.backends.cuda.enable_math_sdp(a.sdpa_kernel == "math")
    spec = RunSpec(model=a.model, size=a.size, ctx=a.ctx, batch=a.batch, attention="sdpa", device="cuda").validate()
    torch.manual_seed(0)
    model = from_config(make_config(request(spec)), "sdpa", dev)
    if a.bf16_weights:  # the parameters only: RoPE's tables (buffers) keep fp32
        for prm in model.parameters():
            prm.data = prm.data.to(torch.bfloat16)
    if a.fp8:
        from torchao.float8 import convert_to_float8_training

        convert_to_float8_training(model, module_filter_fn=lambda m, _fqn: isinstance(m, torch.nn.Linear)
                                   and m.in_features % 16 == 0 and m.out_features % 16 == 0)
    cross_entropy = F.cross_entropy
    if a.liger:
        import liger_kernel.transformers as lk
        from liger_kernel.transformers import LigerCrossEntropyLoss

        getattr(lk, f"apply_liger_kernel_to_{model.config.model_type}")(
            model=model, rms_norm=not a.compile, cross_entropy=False, fused_linear_cross_entropy=False)
        cross_entropy = LigerCrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (a.batch, a.ctx + 1), generator=gen).to(dev)
    inputs, targets = ids[:, :-1], ids[:, 1:]

    forward = (torch.compile(model, mode=None if a.compile_mode == "default" else a.compile_mode) if a.compile
               else model)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = forward(inputs).logits
            flat = logits.reshape(-1, logits.shape[-1])
            loss = cross_entropy(flat if a.liger else flat.float(), targets.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    # Back to back, read once all are done: a training loop that reads nothing back, as perfconsole's
    # default step in flight.
    marks = []
    for _ in range(a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        marks.append((start, end))
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in marks]
    out = {"model": a.model, "size": a.size, "ctx": a.ctx, "batch": a.batch, "steps": a.steps,
           "bf16_weights": a.bf16_weights, "fp8": a.fp8, "compile": a.compile, "compile_mode": a.compile_mode,
           "liger": a.liger, "sdpa_kernel": a.sdpa_kernel, "sdpa_causal": a.sdpa_causal,
           "params": sum(p.numel() for p in model.parameters()), "median_ms": statistics.median(times),
           "min_ms": min(times), "max_ms": max(times)}
    if a.against:
        run = json.load(open(a.against))["data"]
        theirs = run["summary"]["total_ms"]["median"]
        out.update(perfconsole_median_ms=theirs, ratio=theirs / out["median_ms"],
                   within_2_percent=abs(theirs / out["median_ms"] - 1) <= 0.02)
    print(json.dumps(out))


if __name__ == "__main__":
    main()

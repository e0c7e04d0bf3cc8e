"""The child process that measures one attention cell: `python -m perfconsole.core.grids.attention_worker --cell JSON`.

It times `iters` forward passes and `iters` backward passes of causal attention on random Q, K, V of
shape (batch, seq, d) after `warmup` full passes (CUDA events around each pass, one synchronisation
per series), reads the memory in use before backward, and
writes the same versioned JSON-line events as the run worker: run_started, progress, summary (with
`forward_ms` / `backward_ms` statistics and memory), error and finished. An OOM in the backward
keeps the forward's numbers. PERFCONSOLE_FAULT works as in the run worker, with index 0 at the
forward and 1 at the backward measurement.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.stats import summarize
from perfconsole.core.measure.worker import HOLD_HELP, begin, fault_hook, refuse, serve

MIB = float(2**20)


def _attention_fn(impl: str):
    import torch.nn.functional as F

    if impl == "sdpa":
        # The cells are (batch, seq, d); SDPA's fused kernels (flash, memory-efficient) take only 4-D
        # input and silently fall back to the math path, which materialises the scores like naive.
        # A one-head view gives them 4-D.
        return lambda q, k, v: F.scaled_dot_product_attention(
            q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), is_causal=True).squeeze(1)
    from perfconsole.model.transformer import naive_attention

    return naive_attention


class _Timer:
    """Per-iteration times: CUDA events on a GPU (synchronised once per batch), perf_counter on the CPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.pairs: list[Any] = []

    def start(self) -> Any:
        if self.cuda:
            import torch

            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def stop(self, started: Any) -> None:
        self.pairs.append((started, self.start()))

    def ms(self) -> list[float]:
        if self.cuda:
            self.pairs[-1][1].synchronize()
            return [a.elapsed_time(b) for a, b in self.pairs]
        return [(b - a) * 1e3 for a, b in self.pairs]


def measure(cell: dict[str, Any], emit, hook) -> None:
    import torch

    device = torch.device(cell["device"])
    cuda = device.type == "cuda"
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[cell["precision"]]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator(device="cpu").manual_seed(cell["seed"])
    shape = (cell["batch"], cell["seq"], cell["d"])
    q, k, v = (torch.randn(shape, generator=gen).to(device=device, dtype=dtype).requires_grad_()
               for _ in range(3))
    fn = _attention_fn(cell["impl"])
    if cell["compile"]:
        emit(ev.Progress("compiling", "torch.compile: the first pass compiles"))
        fn = torch.compile(fn)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    grad = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)

    def clear() -> None:
        q.grad = k.grad = v.grad = None

    emit(ev.Progress("warmup", f"{cell['warmup']} forward + backward passes"))
    for _ in range(cell["warmup"]):
        fn(q, k, v).backward(grad)
        clear()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    result: dict[str, Any] = {"forward_ms": None, "backward_ms": None, "memory_before_backward_mib": None,
                              "peak_allocated_mib": None}

    def peak() -> None:
        if cuda:
            result["peak_allocated_mib"] = torch.cuda.max_memory_allocated() / MIB

    try:
        emit(ev.Progress("forward", f"{cell['iters']} passes"))
        if hook:
            hook(0)
        timer = _Timer(cuda)
        for _ in range(cell["iters"]):
            t = timer.start()
            out = fn(q, k, v)
            timer.stop(t)
            del out
        result["forward_ms"] = summarize(timer.ms()).to_dict()

        out = fn(q, k, v)
        sync()
        if cuda:
            result["memory_before_backward_mib"] = torch.cuda.memory_allocated() / MIB
        del out
        emit(ev.Progress("backward", f"{cell['iters']} passes"))
        if hook:
            hook(1)
        timer = _Timer(cuda)
        for _ in range(cell["iters"]):
            out = fn(q, k, v)
            # No synchronisation here: the start event runs on the GPU right after the forward's
            # kernels, so the backward's time is GPU time. A sync would leave the GPU idle while the
            # host starts the backward, and count that (0.1-0.3 ms on an H200 VM) as backward.
            t = timer.start()
            out.backward(grad)
            timer.stop(t)
            del out
            clear()
        result["backward_ms"] = summarize(timer.ms()).to_dict()
        peak()
    except BaseException:
        peak()
        emit(ev.SummaryReady(_finite(result)))  # what was measured before the failure is kept
        raise
    emit(ev.SummaryReady(_finite(result)))


def _finite(result: dict[str, Any]) -> dict[str, Any]:
    """One iteration has no confidence interval; JSON cannot carry NaN, so it becomes null."""
    out = dict(result)
    for key in ("forward_ms", "backward_ms"):
        if out[key]:
            out[key] = {k: (None if isinstance(x, float) and x != x else x) for k, x in out[key].items()}
    return out


def _preload() -> None:
    """What a held worker imports before its turn: torch, torch.compile's front end (slow), the model."""
    for name in ("torch", "torch._dynamo", "perfconsole.core.grids.attention", "perfconsole.model.transformer"):
        importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="perfconsole-attention-worker")
    parser.add_argument("--cell", required=True, help="AttentionCell as JSON")
    parser.add_argument("--hold", action="store_true", help=HOLD_HELP)
    args = parser.parse_args(argv)
    emit = begin(args.hold, _preload)
    if emit is None:
        return 0
    from perfconsole.core.grids.attention import AttentionCell  # after the stdout swap: it imports torch

    try:
        cell = AttentionCell.from_dict(json.loads(args.cell)).validate()
    except (ValueError, TypeError, KeyError) as exc:
        return refuse(emit, str(exc))
    hook = fault_hook(os.environ.get("PERFCONSOLE_FAULT"))
    return serve(emit, cell.device, cell.to_dict(), lambda _env: measure(cell.to_dict(), emit, hook))


if __name__ == "__main__":
    sys.exit(main())

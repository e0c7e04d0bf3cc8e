"""Every optimization a run applies to its built model is a converter, registered here under the name of the
setting that turns it on (a RunSpec field declared with `apply=True`, core.settings), and applied in one loop,
`convert`, in the order registered (torchtitan's model converters, applied by one container in one loop).

The order is the one the runs have always had: the weights' dtype first (what every later swap keeps), then
liger's kernels and torchao's float8 matmuls (fp8 swaps the Linear layers liger left alone), the attention's
kernel and causal flag, activation checkpointing of each block, then the data-parallel wrapper around the whole
model, torch.compile around that wrapper (DDP's graph splitting needs to see DDP), and last, for DDP's Python
reducer, compiled autograd: not a module but the context each step's forward and backward run inside.

A converter may check what this machine can do (`check`: a package, a GPU's compute capability); `check`
runs those checks before the model is built, the last registered first, so a ladder rung's reason is its own
change's. What the spec alone rules out is each setting's `needs` (core.settings), refused before any process.

The faster paths themselves live here too: bf16 weights, liger-kernel's fused RMSNorm/SwiGLU/cross-entropy
and torchao's float8 matmuls, beside the pieces of a step a spec picks (AdamW's implementation, the loss). The
model package stays pure PyTorch; the optional packages (`pip install perfconsole[fast]`) are imported late,
only by a run that asks for them. A path that cannot run here raises `Unsupported` with the reason, before any
step, and the worker reports the run as `unsupported` rather than failed. Every swap keeps the model's own
parameters (the same tensors, the same initialisation), so a rung's losses can be compared with the first
rung's. bf16 weights keep the same values, rounded to bf16: with no fp32 master copy, every update is rounded
to bf16 too, so such a run's losses drift from an fp32-weight run's on purpose.

liger's RMSNorm is swapped in only when the model is not compiled. Under torch.compile (torch 2.11,
liger-kernel 0.8.5, on an H200) a model with LigerRMSNorm computes right gradients at the first step,
yet from the second step its logits are uniform (the loss is ln(vocab)), with or without in-place
backward, while the same model without torch.compile trains as the plain model does
(docs/results/liger_probe_h200.md). Inductor fuses the plain RMSNorm itself; liger's SwiGLU and
cross-entropy kernels train right under torch.compile and are used either way.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from perfconsole.core import events as ev
from perfconsole.core.measure import Unsupported, attention_kernels, checkpointing, compile_cache
from perfconsole.core.settings import RunSpec

if TYPE_CHECKING:
    from perfconsole.core.measure.job import Job

Emit = Callable[[ev.Event], None]
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


INSTALL = "install perfconsole[fast]"
FP8_MIN_CAPABILITY = (8, 9)

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def check_fp8(spec: RunSpec, device: torch.device) -> None:
    """fp8 matmuls need torchao and a GPU of compute capability 8.9 or more."""
    need("torchao", "torchao")
    cap = torch.cuda.get_device_capability(device)
    if cap < FP8_MIN_CAPABILITY:
        raise Unsupported(f"fp8 needs compute capability >= 8.9, this GPU has {cap[0]}.{cap[1]}")


def check_liger(spec: RunSpec, device: torch.device) -> None:
    need("liger_kernel", "liger-kernel")


def need(module: str, package: str) -> None:
    """Unsupported, saying what to install, where `module` cannot be imported here."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise Unsupported(f"{package} is not installed: {INSTALL}")


def bf16_weights(model: nn.Module) -> None:
    """The parameters in bf16; buffers (RoPE's tables) keep their precision."""
    for p in model.parameters():
        p.data = p.data.to(torch.bfloat16)


def liger(model: nn.Module, info: Any, norms: bool) -> Loss:
    """liger's kernels swapped in (its RMSNorm only with `norms`); returns liger's cross-entropy loss. `info`
    (model.sources.ModelInfo) says which hf architecture's liger patch applies."""
    if info is not None and info.source == "hf":
        return _liger_hf(model, str(info.config.get("model_type")), norms=norms)
    return _liger_builtin(model, norms=norms)


def _torch_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))


torch_loss = _torch_loss  # the default loss, also the one FLOPs are counted with (core.measure.model_build)


def _liger_hf(model: nn.Module, arch: str, norms: bool) -> Loss:
    """liger's own patch for the architecture (apply_liger_kernel_to_<arch>) on this instance. Its fused
    linear cross-entropy needs the labels inside the model's forward, which the engine does not pass, so the
    loss is liger's cross-entropy on the logits, as for the builtin model."""
    import inspect

    import liger_kernel
    import liger_kernel.transformers as lk
    from liger_kernel.transformers import LigerCrossEntropyLoss

    patch = getattr(lk, f"apply_liger_kernel_to_{arch}", None)
    if patch is None:
        raise Unsupported(f"liger-kernel {getattr(liger_kernel, '__version__', '')} has no "
                          f"apply_liger_kernel_to_{arch}".replace("  ", " "))
    wanted = {"model": model, "rms_norm": norms, "cross_entropy": False, "fused_linear_cross_entropy": False}
    accepted = inspect.signature(patch).parameters
    patch(**{k: v for k, v in wanted.items() if k in accepted})
    ce = LigerCrossEntropyLoss()
    return lambda logits, targets: ce(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _liger_builtin(model: nn.Module, norms: bool) -> Loss:
    from liger_kernel.transformers import LigerCrossEntropyLoss, LigerRMSNorm
    from liger_kernel.transformers.functional import liger_swiglu

    from perfconsole.model.transformer import RMSNorm, SwiGLU

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if norms and isinstance(child, RMSNorm):
                fused = LigerRMSNorm(child.weight.shape[0], eps=child.eps)
                fused.weight = child.weight  # the model's own parameter, not a fresh one
                setattr(parent, name, fused)
            elif isinstance(child, SwiGLU):
                # One kernel for silu(w1 x) * w3 x, forward and backward; the projections stay as they are.
                child.forward = (lambda m: lambda x: m.w2(liger_swiglu(m.w1(x), m.w3(x))))(child)
    ce = LigerCrossEntropyLoss()

    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # Liger computes in fp32 inside the kernel: no fp32 copy of the logits is made.
        return ce(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

    return loss


def float8(model: nn.Module) -> None:
    from torchao.float8 import convert_to_float8_training

    from perfconsole.model.transformer import Linear

    # torchao swaps nn.Linear; the model's Linear is its own (no bias), so it becomes an nn.Linear first,
    # holding the same weight.
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Linear):
                out_f, in_f = child.weight.shape
                lin = nn.Linear(in_f, out_f, bias=False, device="meta")
                lin.weight = child.weight
                setattr(parent, name, lin)
    # float8 matmuls need both dimensions divisible by 16.
    convert_to_float8_training(model, module_filter_fn=lambda m, _fqn: isinstance(m, nn.Linear)
                               and m.in_features % 16 == 0 and m.out_features % 16 == 0)


def make_optimizer(opt: Any, model: nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """AdamW as the spec's optimizations section says (`opt.optimizer`): fused (one kernel per step; the CPU has
    foreach instead, as before), foreach (a few multi-tensor kernels) or forloop (one kernel per op and parameter);
    with `opt.zero`, that AdamW on each rank's shard of the parameters (ZeRO-1: ZeroRedundancyOptimizer over the
    job's default group, which broadcasts each shard after its step); for a DDP job of zero2, its ShardedStep (ZeRO-2:
    core.measure.sharded_step), which has an optimizer's step and zero_grad."""
    if opt.optimizer == "fused" and device.type == "cuda":
        kw = {"fused": True}
    elif opt.optimizer == "forloop":
        kw = {"foreach": False, "fused": False}
    elif opt.optimizer == "foreach":
        kw = {"foreach": True, "fused": False}
    else:
        kw = {"fused": False}  # fused on the CPU: what the runs always did
    # ZeRO-2 (the spec's zero2): the DDP module carries its ShardedStep (core.measure.data_parallel.wrap_model), which
    # steps the first step with AdamW over every parameter and each rank's slices with AdamW of the same kind after
    sharded = getattr(getattr(model, "_orig_mod", model), "sharded_step", None)
    if sharded is not None:
        sharded.full = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)
        sharded.make = lambda params: torch.optim.AdamW(params, lr=1e-4, **kw)
        return sharded
    if opt.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4, **kw)
    return torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)


@dataclass
class Subject:
    """What the converters change: the model (a wrapper or a compiled module may take its place) and the loss;
    and what they read: the model's description (model.sources.ModelInfo) and one rank's job."""
    model: nn.Module
    loss: Loss = torch_loss
    info: Any = None
    job: Job | None = None
    # what each step's forward and backward run inside (compiled autograd: optimize_ddp python_reducer)
    around_step: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext


@dataclass(frozen=True)
class Converter:
    setting: str                                          # the RunSpec field that turns it on
    convert: Callable[[RunSpec, Subject], None]
    applies: Callable[[RunSpec], bool]
    check: Callable[[RunSpec, torch.device], None] | None = None
    progress: Callable[[RunSpec], tuple[str, str]] | None = None  # (phase, words) said before it applies


REGISTRY: dict[str, Converter] = {}
_DEFAULTS = {f.name: f.default for f in fields(RunSpec)}


def register(setting: str, applies: Callable[[RunSpec], bool] | None = None,
             check: Callable[[RunSpec, torch.device], None] | None = None,
             progress: Callable[[RunSpec], tuple[str, str]] | None = None):
    """Register the decorated `(spec, subject)` function as `setting`'s converter, after those registered before.
    It applies where the setting is not at its default, unless `applies` says otherwise."""
    if setting not in _DEFAULTS:
        raise ValueError(f"{setting!r} is no RunSpec setting")

    def add(convert: Callable[[RunSpec, Subject], None]) -> Callable[[RunSpec, Subject], None]:
        REGISTRY[setting] = Converter(setting, convert, applies or (lambda s: getattr(s, setting) != _DEFAULTS[setting]),
                                      check, progress)
        return convert
    return add


def applying(spec: RunSpec) -> list[Converter]:
    """The converters the spec turns on, in the order they apply."""
    return [c for c in REGISTRY.values() if c.applies(spec)]


def check(spec: RunSpec, device: torch.device) -> None:
    """Raise Unsupported for what this machine cannot do of the spec's optimizations; called before the
    model is built, the last converter's check first."""
    for c in reversed(applying(spec)):
        if c.check is not None:
            c.check(spec, device)


def convert(spec: RunSpec, subject: Subject, emit: Emit | None = None,
            lap: Callable[[str], object] | None = None) -> Subject:
    """Apply the spec's converters to the subject, in order: the one loop of every optimization. `lap(setting)` is
    called as each converter is done (core.measure.start: each converter's seconds)."""
    for c in applying(spec):
        if c.progress is not None and emit is not None:
            emit(ev.Progress(*c.progress(spec)))
        c.convert(spec, subject)
        if lap is not None:
            lap(c.setting)
    return subject


def _applying(name: str) -> Callable[[RunSpec], tuple[str, str]]:
    return lambda s: ("applying", f"{name} {getattr(s, name)}")


@register("weights")
def _bf16_weights(spec: RunSpec, subject: Subject) -> None:
    bf16_weights(subject.model)


@register("kernels", check=check_liger)
def _liger(spec: RunSpec, subject: Subject) -> None:
    # liger's RMSNorm stays out of a compiled model (the module's docstring says why).
    subject.loss = liger(subject.model, subject.info, norms=not spec.compile)


@register("fp8", check=check_fp8)
def _fp8(spec: RunSpec, subject: Subject) -> None:
    float8(subject.model)


@register("sdpa_kernel", progress=_applying("sdpa_kernel"))
def _sdpa_kernel(spec: RunSpec, subject: Subject) -> None:
    attention_kernels.apply(spec.sdpa_kernel, subject.model)


@register("sdpa_causal", progress=_applying("sdpa_causal"))
def _sdpa_causal(spec: RunSpec, subject: Subject) -> None:
    attention_kernels.causal(spec.sdpa_causal, subject.model)


@register("checkpoint", progress=_applying("checkpoint"))
def _checkpoint(spec: RunSpec, subject: Subject) -> None:
    checkpointing.apply(spec.checkpoint, subject.model)


@register("parallel", progress=lambda s: ("building", f"{s.parallel} over {s.nproc} processes"))
def _data_parallel(spec: RunSpec, subject: Subject) -> None:
    if subject.job is None:
        raise ValueError(f"parallel {spec.parallel} is one rank of a job: its processes start under torchrun "
                         "(core.measure.worker.run_rank)")
    subject.model = subject.job.wrap(subject.model)


@register("compile", progress=lambda s: ("compiling", f"torch.compile ({s.compile_mode}): the first step compiles"))
def _compile(spec: RunSpec, subject: Subject) -> None:
    compile_cache.point()  # before anything compiles: a rerun loads what an earlier run compiled
    subject.model = torch.compile(subject.model, mode=None if spec.compile_mode == "default" else spec.compile_mode)


@register("optimize_ddp", applies=lambda s: s.optimize_ddp == "python_reducer",
          progress=lambda s: ("compiling", "compiled autograd: the backward with DDP's all-reduces in its graph"))
def _compiled_autograd(spec: RunSpec, subject: Subject) -> None:
    # DDP chose its Python reducer as it was built (torch._dynamo.config.optimize_ddp, core.measure.data_parallel);
    # each step's forward and backward run under compiled autograd, whose backward graph torch.compile compiles
    # as it does the forward
    from torch._dynamo import compiled_autograd

    backend = torch.compile(mode=None if spec.compile_mode == "default" else spec.compile_mode)
    subject.around_step = lambda: compiled_autograd._enable(backend)

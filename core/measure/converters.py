"""Every optimization a run applies to its built model is a converter, registered here under the name of the
setting that turns it on (a RunSpec field declared with `apply=True`, core.settings), and applied in one loop,
`convert`, in the order registered (torchtitan's model converters, applied by one container in one loop).

The order is the one the runs have always had: the weights' dtype first (what every later swap keeps), then
liger's kernels and torchao's float8 matmuls (fp8 swaps the Linear layers liger left alone), the attention's
kernel and causal flag, activation checkpointing of each block, then the data-parallel wrapper around the whole
model, and torch.compile last, around that wrapper (DDP's graph splitting needs to see DDP).

A converter may check what this machine can do (`check`: a package, a GPU's compute capability); `check`
runs those checks before the model is built, the last registered first, so a ladder rung's reason is its own
change's. What the spec alone rules out is each setting's `needs` (core.settings), refused before any process.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from perfconsole.core import events as ev
from perfconsole.core.measure import attention_kernels, checkpointing, compile_cache, fast_paths
from perfconsole.core.settings import RunSpec

if TYPE_CHECKING:
    from perfconsole.core.measure.job import Job

Emit = Callable[[ev.Event], None]


@dataclass
class Subject:
    """What the converters change: the model (a wrapper or a compiled module may take its place) and the loss;
    and what they read: the model's description (model.sources.ModelInfo) and one rank's job."""
    model: nn.Module
    loss: fast_paths.Loss = fast_paths.torch_loss
    info: Any = None
    job: Job | None = None


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
    """Raise fast_paths.Unsupported for what this machine cannot do of the spec's optimizations; called before the
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
    fast_paths.bf16_weights(subject.model)


@register("kernels", check=fast_paths.check_liger)
def _liger(spec: RunSpec, subject: Subject) -> None:
    # liger's RMSNorm stays out of a compiled model (fast_paths' docstring says why).
    subject.loss = fast_paths.liger(subject.model, subject.info, norms=not spec.compile)


@register("fp8", check=fast_paths.check_fp8)
def _fp8(spec: RunSpec, subject: Subject) -> None:
    fast_paths.float8(subject.model)


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

"""RunSpec: everything that defines one benchmark run, each setting declared once (core.settings.declarations).

A field's declaration holds its default, section, help, choices, flag, form row, sweep axis, label words,
whether it changes "the same program" and what it needs of the rest of the spec. An optimization's code is
its converter, registered under the field's name where models are measured (core.measure.converters), which
this package never names: the spec is vocabulary, read by the measuring code, not the other way. Every surface
is built from these declarations; `validate()` (its rules in core.settings.rules) checks every rule that needs only
the spec, before any process starts. Validation errors are one line that names the field and the allowed values.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, fields, make_dataclass, replace
from pathlib import Path
from typing import Any

from perfconsole.core.settings.declarations import SECTIONS, Command, declared, setting
from perfconsole.core.settings.rules import MAX_NPROC, SIZE_NAMES, SpecError  # noqa: F401  (named from here too)
from perfconsole.core.settings.rules import validate as validate_spec
from perfconsole.core.settings.rules import (needs_ddp, needs_mode, needs_optimize_ddp, needs_parallel, needs_repeat,
                                             needs_reshard, needs_scaling, needs_warmup, needs_zero,
                                             needs_zero2)
from perfconsole.model.config import BUILTIN_VOCAB, SIZES
from perfconsole.model.sources import hf_shapes
from perfconsole.model.sources import parse as parse_model

PRECISIONS = ("fp32", "bf16", "fp16")
MODES = ("fwd", "fwd_bwd", "train")
ATTENTIONS = ("naive", "sdpa")
DEVICES = ("cuda", "cpu")
PROFILERS = ("none", "nsys", "torch", "ncu")
OPTIMIZERS = ("fused", "foreach", "forloop")                     # AdamW's implementation
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")   # torch.compile modes
KERNELS = ("torch", "liger")                                     # RMSNorm/SwiGLU/cross-entropy kernels
SDPA_KERNELS = ("auto", "flash", "cudnn", "efficient", "math")    # scaled_dot_product_attention's kernel
WEIGHTS = ("fp32", "bf16")                                       # the parameters' (and AdamW state's) dtype
CHECKPOINTS = ("none", "blocks")                                 # activation checkpointing
PARALLELS = ("none", "ddp", "fsdp")
COMM_HOOKS = ("none", "bf16")
# torch._dynamo.config.optimize_ddp for a compiled DDP job: split the graph at DDP's buckets (torch's default,
# so the all-reduces can overlap the backward), compile it whole (the all-reduces after the backward), or trace
# the backward with compiled autograd, DDP's all-reduces inside its graph (DDP's Python reducer; experimental in
# torch): inductor buckets them and places them among the backward's kernels, with no graph split.
OPTIMIZE_DDP = ("ddp_optimizer", "no_optimization", "python_reducer")


def _on(word: str):
    return lambda v, s: word if v else None


def _unless(default: Any, fmt: str = "{}"):
    return lambda v, s: None if v == default else fmt.format(v)


def _cuda(what: str):
    return lambda s: None if s.device == "cuda" else f"{what} need device cuda"


# What a setting needs of the rest of the spec, in the words the runs and the ladder say it.
def _needs_compile_mode(v: str, s: RunSpec) -> str | None:
    if v != "default" and not s.compile:
        return f"{v} needs compile"
    return _cuda("CUDA graphs (compile mode reduce-overhead)")(s) if v == "reduce-overhead" else None


def _needs_liger(v: str, s: RunSpec) -> str | None:
    if v != "liger":
        return None
    if s.model_kind == "factory":
        return "liger patches the builtin model and hf: architectures; a factory's layers are its own"
    return _cuda("liger-kernel's Triton kernels")(s)


def _needs_fp8(v: bool, s: RunSpec) -> str | None:
    if not v:
        return None
    if s.device != "cuda":
        return "fp8 matmuls need device cuda"
    return "fp8 matmuls here follow bf16 or fp16 training; choose precision bf16" if s.precision == "fp32" else None


def _needs_sdpa_kernel(v: str, s: RunSpec) -> str | None:
    if v == "auto":
        return None
    if s.attention != "sdpa":
        return f"sdpa kernel {v} picks scaled_dot_product_attention's kernel; it needs attention sdpa"
    if v in ("flash", "cudnn"):
        if s.device != "cuda":
            return f"sdpa kernel {v} needs device cuda"
        if s.precision == "fp32":
            return f"sdpa kernel {v} runs bf16 or fp16 only; choose precision bf16"
    return None


def _needs_memory(v: bool, s: RunSpec) -> str | None:
    if v and s.device != "cuda":
        return "memory profiling needs device cuda"
    return "memory history is recorded for one process; use nproc 1" if v and s.nproc > 1 else None


def _fsdp_bf16_needs(on: bool, s: Any) -> str | None:
    """FSDP's bf16 parameters and gradients stand in for autocast's casts: they need FSDP, bf16 compute and the
    fp32 master weights they are cast from."""
    if not on:
        return None
    if s.parallel != "fsdp":
        return f"is an FSDP setting (bf16 gathers and reduce-scatters); it needs parallel fsdp, not {s.parallel!r}"
    if s.precision != "bf16":
        return f"computes in bf16; it needs precision bf16, not {s.precision!r}"
    if s.weights != "fp32":
        return "casts fp32 weights to bf16 for each gather; with weights bf16 every collective is bf16 already"
    return None


@dataclass(frozen=True)
class RunSpec:
    # The declaration order is the label's order (RunSpec.label).
    model: str = setting(
        "builtin", "model", "builtin (perfconsole's Transformer), hf:ARCH (a transformers architecture with random "
        "weights, nothing downloaded: llama, qwen2, qwen3, gpt2, ...; needs perfconsole[hf]), or PATH.py:FACTORY / "
        "package.module:FACTORY (your code: FACTORY(ctx=, vocab_size=, **model_args) returns an nn.Module mapping "
        "(batch, ctx) token ids to logits; docs/models.md)", metavar="MODEL", form="model", row=0, same_program=True)
    model_args: tuple[str, ...] = setting(
        (), "model", "for hf: a config field (num_key_value_heads=4); for a factory: a keyword argument; "
        "repeatable, and one value may hold several pairs between commas",
        flag="--model-arg", metavar="KEY=VALUE", form="  model args", row=1, same_program=True)
    size: str = setting(
        "small", "model", f"model size: {', '.join(SIZE_NAMES)} for builtin; an hf architecture's own sizes (llama: "
        "tiny, 1B, 3B, 8B; gpt2: tiny, 124M, 355M, 774M, 1.5B; qwen2: tiny, 0.5B, 1.5B, 3B, 7B; qwen3: tiny, 0.6B, "
        "1.7B, 4B, 8B; any: default, custom); a factory takes none (--model-arg instead)",
        default_text="small on cuda, tiny on cpu; hf: the smallest published size on cuda", form="size", row=2,
        axis="sizes", same_program=True)
    d_model: int | None = setting(None, "model", "custom size only", form="  d_model", row=3, custom_only=True,
                                  same_program=True)
    d_ff: int | None = setting(None, "model", "custom size only", form="  d_ff", row=4, custom_only=True,
                               same_program=True)
    n_layers: int | None = setting(None, "model", "custom size only", form="  n_layers", row=5, custom_only=True,
                                   same_program=True)
    n_heads: int | None = setting(None, "model", "custom size only", form="  n_heads", row=6, custom_only=True,
                                  same_program=True)
    vocab_size: int | None = setting(None, "model", "the vocabulary of the builtin model, an hf custom shape or a "
                                     "factory", default_text="the model's own: 10,000 for builtin and an hf custom "
                                     "shape, the factory's own default, read from its logits", same_program=True)
    seed: int = setting(0, "execution", "the seed of the weights and the batch")
    ctx: int = setting(256, "shape", "context length (tokens)", form="ctx", row=7, axis="ctxs", same_program=True,
                       tag=lambda v, s: f"ctx{v}")
    batch: int = setting(4, "shape", "batch size (per process in a job)", form="batch", row=8, same_program=True,
                         tag=lambda v, s: f"b{v}")
    precision: str = setting("fp32", "numerics", "bf16/fp16 via autocast", choices=PRECISIONS, form="precision",
                             row=9, axis="precisions", same_program=True, tag=lambda v, s: v)
    mode: str = setting("fwd_bwd", "shape", "inference, forward+backward, full train step", choices=MODES,
                        form="mode", row=10, axis="modes", same_program=True, tag=lambda v, s: v,
                        needs=needs_mode)
    warmup: int = setting(5, "execution", "warm-up steps, timed and reported apart (0 allowed)", form="warmup",
                          row=11, axis="warmups", needs=needs_warmup)
    steps: int = setting(10, "execution", "measured steps", form="steps", row=12)
    attention: str = setting("naive", "optimizations", "the builtin's attention", choices=ATTENTIONS,
                             form="attention", row=14, same_program=True, tag=_unless("naive"))
    sdpa_kernel: str = setting(
        "auto", "optimizations", "the kernel scaled_dot_product_attention runs (torch's SDPBackend): auto lets torch "
        "choose (cuDNN's for bf16 on an H100/H200), flash is FlashAttention-2; the others are turned off, so a shape "
        "the kernel cannot take is an error, not a quiet fallback", choices=SDPA_KERNELS, same_program=True,
        tag=_unless("auto", "sdpa-{}"), needs=_needs_sdpa_kernel)
    sdpa_causal: bool = setting(
        False, "optimizations", "an hf: model's attention as SDPA's is_causal with no mask tensor under torch.compile "
        "too (while torch.compile traces, transformers cannot rule out packed sequences and builds a dense ctx x ctx "
        "mask, which keeps SDPA off its causal kernels); the batches are one unpadded sequence a row, so the "
        "attention is the same", same_program=True,
        tag=_on("sdpa-causal"), needs=lambda v, s: None if not v or (s.model_kind == "hf" and s.attention == "sdpa")
        else "sdpa causal is for hf: models with attention sdpa (the builtin passes is_causal itself)")
    compile: bool = setting(False, "optimizations", "torch.compile the model", form="compile", row=15,
                            same_program=True, tag=_on("compile"))
    tf32: bool = setting(False, "numerics", "allow TF32 matmuls in fp32", form="tf32", row=16, same_program=True,
                         tag=_on("tf32"))
    step_sync: bool = setting(False, "execution", "synchronise after every step (as a loop that reads the loss each "
                              "step); by default the next step is queued while the GPU finishes the last",
                              tag=_on("step-sync"))
    profile: str = setting("none", "profiling", "the profiler of the profiled steps after the quiet ones",
                           choices=PROFILERS, form="profiler", row=18, tag=_unless("none"),
                           needs=lambda v, s: f"{v} needs device cuda; use torch on the CPU"
                           if v in ("nsys", "ncu") and s.device != "cuda" else "ncu profiles one process; use "
                           "nproc 1" if v == "ncu" and s.nproc > 1 else None)
    memory: bool = setting(False, "profiling", "record CUDA memory history (memory_viz snapshot)",
                           needs=_needs_memory)
    peak_tflops: float | None = setting(None, "profiling", "the GPU's dense peak, for MFU and speed of light",
                                        default_text="measured")
    peak_gbps: float | None = setting(None, "profiling", "memory bandwidth for speed of light",
                                      default_text="measured")
    optimizer: str = setting("fused", "optimizations", "AdamW's implementation (fused falls back to foreach on "
                             "the CPU)", choices=OPTIMIZERS, same_program=True, tag=_unless("fused", "adamw-{}"))
    zero: bool = setting(False, "optimizations", "ZeRO-1 for a DDP job: AdamW's state sharded over its ranks "
                         "(torch.distributed.optim.ZeroRedundancyOptimizer); each rank steps its shard of the "
                         "parameters and broadcasts it to the others: less memory a rank, a broadcast more a step",
                         tag=_on("zero1"), needs=needs_zero)
    compile_mode: str = setting("default", "optimizations", "with --compile; reduce-overhead is CUDA graphs",
                                choices=COMPILE_MODES, same_program=True, tag=_unless("default"),
                                needs=_needs_compile_mode)
    kernels: str = setting("torch", "optimizations", "RMSNorm/SwiGLU/cross-entropy kernels (liger needs "
                           "perfconsole[fast])", choices=KERNELS, same_program=True, tag=_unless("torch"),
                           needs=_needs_liger)
    fp8: bool = setting(False, "numerics", "torchao float8 matmuls (perfconsole[fast], compute capability >= 8.9)",
                        same_program=True, tag=_on("fp8"), needs=_needs_fp8)
    weights: str = setting("fp32", "numerics", "bf16 keeps parameters, gradients and AdamW state in bf16 (no fp32 "
                           "master copy: rounds differently; needs --precision bf16)", choices=WEIGHTS,
                           same_program=True, tag=_unless("fp32", "{}-weights"),
                           needs=lambda v, s: f"bf16 weights train with precision bf16, not {s.precision}"
                           if v == "bf16" and s.precision != "bf16" else None)
    checkpoint: str = setting(
        "none", "optimizations", "activation checkpointing: blocks recomputes each repeated block's forward in the "
        "backward (torch.utils.checkpoint) and keeps only its inputs: less memory, more time",
        choices=CHECKPOINTS, form="checkpoint", row=17, axis="checkpoints", same_program=True,
        tag=_unless("none", "checkpoint-{}"),
        needs=lambda v, s: "recomputes the forward in the backward; it needs mode fwd_bwd or train, not fwd"
        if v != "none" and s.mode == "fwd" else None)
    nproc: int = setting(1, "parallel", "processes in the job, one GPU each on cuda, each with --batch (weak scaling)",
                         metavar="N", form="procs/job", row=20, tag=lambda v, s: f"{s.parallel}x{v}" if v > 1 else None)
    parallel: str = setting("none", "parallel", "the data-parallel wrapper", choices=PARALLELS,
                            default_text="ddp with --nproc > 1", form="parallel", row=21,
                            needs=needs_parallel)
    bucket_mb: float | None = setting(None, "parallel", "DDP's gradient bucket size, bucket_cap_mb", metavar="MB",
                                      default_text="DDP's 25", form="  bucket MB", row=22,
                                      tag=lambda v, s: None if v is None else f"bucket{v:g}",
                                      needs=needs_ddp(lambda v: v is not None))
    grad_as_bucket_view: bool = setting(False, "parallel", "DDP's gradient_as_bucket_view", form="  grad view",
                                        row=23, tag=_on("bucket-view"), needs=needs_ddp(bool))
    comm_hook: str = setting("none", "parallel", "DDP's bf16_compress_hook", choices=COMM_HOOKS, form="  comm hook",
                             row=24, tag=_unless("none", "{}-hook"),
                             needs=needs_ddp(lambda v: v != "none"))
    reshard: bool = setting(True, "parallel", "FSDP: keep each block's parameters gathered from its forward to its "
                            "backward (reshard_after_forward=False): one all-gather fewer per block, more memory",
                            flag="--no-reshard", form="  reshard", row=26, tag=lambda v, s: None if v else "no-reshard",
                            needs=needs_reshard)
    fsdp_bf16: bool = setting(False, "parallel", "FSDP's mixed precision (MixedPrecisionPolicy): gather parameters "
                              "and reduce-scatter gradients in bf16, half the bytes; the fp32 shards stay the master "
                              "copy (precision bf16)", form="  fsdp bf16", row=27, tag=_on("fsdp-bf16"),
                              needs=_fsdp_bf16_needs)
    optimize_ddp: str = setting("ddp_optimizer", "parallel", "how torch.compile treats DDP "
                                "(torch._dynamo.config.optimize_ddp): split the graph at DDP's buckets, compile it "
                                "whole, or python_reducer: compiled autograd traces the backward with DDP's "
                                "all-reduces in its graph (needs --compile)", choices=OPTIMIZE_DDP, metavar="MODE",
                                form="  optimize ddp", row=25,
                                tag=lambda v, s: {"no_optimization": "no-ddp-optimizer",
                                                  "python_reducer": "compiled-autograd"}.get(v),
                                needs=needs_optimize_ddp)
    nccl_priority: bool = setting(False, "parallel", "NCCL's streams at high priority (ProcessGroupNCCL.Options."
                                  "is_high_priority_stream): the collectives' kernels take SMs ahead of the compute "
                                  "kernels queued beside them, so the backward can hide more of them (nproc > 1 on "
                                  "cuda)", tag=_on("nccl-priority"),
                                  needs=lambda v, s: "nccl priority is NCCL's: it needs device cuda and nproc 2 or "
                                  "more" if v and (s.device != "cuda" or s.nproc < 2) else None)
    zero2: bool = setting(False, "parallel", "ZeRO-2 inside DDP (core.measure.sharded_step): DDP's comm hook "
                          "reduce-scatters each gradient bucket (half the all-reduce's bytes), AdamW steps each rank's "
                          "slice of the parameters, which are all-gathered after it: a world-th of AdamW's work and "
                          "state a rank, a gather more a step, a flat copy of the parameters more a rank",
                          tag=_on("zero2"), needs=needs_zero2)
    scaling: bool = setting(False, "parallel", "also run the one-process spec first, for weak-scaling efficiency",
                            form="  scaling", row=28, needs=needs_scaling)
    repeat: int = setting(1, "execution", "run the spec in N fresh processes, one after the other, for the spread "
                          "between them", metavar="N", form="processes", row=13, tag=lambda v, s: f"x{v}" if v > 1 else None,
                          needs=needs_repeat)
    device: str = setting("cuda", "execution", "where it runs", choices=DEVICES,
                          default_text="cuda when available, else cpu", form="device", row=19, same_program=True)

    @property
    def model_kind(self) -> str:
        """builtin, hf or factory (model.sources.parse): what every layer asks, decided in one place."""
        try:
            return parse_model(self.model)[0]
        except ValueError:
            return "unknown"

    def dims(self) -> tuple[int, int, int, int]:
        """(d_model, d_ff, n_layers, n_heads) of the model this spec builds; zeros where the spec does not
        say (a factory's model, an hf architecture at its config's defaults: the record's `model` does)."""
        if self.size == "custom":
            return (self.d_model, self.d_ff, self.n_layers, self.n_heads)  # type: ignore[return-value]
        if self.model_kind == "builtin":
            return SIZES[self.size]
        if self.model_kind == "hf":
            return hf_shapes.dims(self.model[3:].lower(), self.size) or (0, 0, 0, 0)
        return (0, 0, 0, 0)

    def model_label(self) -> str:
        """The model in a few words: `small`, `hf:llama 1B`, `student_model.py:build`; a custom size with its
        dimensions (`custom d64 ff256 l2 h4`), so that two custom shapes never share a name."""
        size = self.size
        if size == "custom" and None not in (self.d_model, self.d_ff, self.n_layers, self.n_heads):
            size = f"custom d{self.d_model} ff{self.d_ff} l{self.n_layers} h{self.n_heads}"
        if self.model_kind == "builtin":
            return size
        if self.model_kind == "hf":
            return f"{self.model} {size}"
        target, _, factory = self.model.rpartition(":")
        return f"{Path(target).name}:{factory}" if target.endswith(".py") else self.model

    @property
    def vocab(self) -> int:
        """The vocabulary the formulas take where no model told it: the spec's, else the builtin's."""
        return BUILTIN_VOCAB if self.vocab_size is None else self.vocab_size

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.ctx

    def label(self) -> str:
        """The model, then each setting's own words where it has them (its `tag`), in declaration order."""
        words = [t for f, s in declared(RunSpec) if s.tag and (t := s.tag(getattr(self, f.name), self))]
        return " ".join([self.model_label(), *words])

    def section(self, name: str) -> Any:
        """The fields of one section, as a frozen object: what a helper that needs only those is given."""
        cls = _section_class(name)
        return cls(**{f.name: getattr(self, f.name) for f in fields(cls)})

    def validate(self) -> RunSpec:
        validate_spec(self)
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        known = {f.name for f in fields(cls)}
        if "step_sync" not in data:  # recorded before the field existed, when every step was synchronised
            data = {**data, "step_sync": True}
        if isinstance(data.get("model_args"), list):  # JSON has no tuples
            data = {**data, "model_args": tuple(data["model_args"])}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(unknown[0], f"unknown field; known fields: {', '.join(sorted(known))}")
        return cls(**data)

    def with_(self, **changes: Any) -> RunSpec:
        return replace(self, **changes)


@functools.cache
def _section_class(name: str) -> type:
    if name not in SECTIONS:
        raise ValueError(f"unknown section {name!r}; sections: {', '.join(SECTIONS)}")
    return make_dataclass(f"{name.title()}Settings", [f.name for f, s in declared(RunSpec) if s.section == name],
                          frozen=True)


# Commands whose defaults differ from `run`'s say so here, and their help prints it.
# A sweep's cells each run one process: a data-parallel job or a custom shape is not a sweep's cell.
SWEEP = Command("sweep", defaults={"ctx": (128, 256, 512)}, axes=True, omit=frozenset(
    ("nproc", "parallel", "bucket_mb", "grad_as_bucket_view", "comm_hook", "reshard", "fsdp_bf16", "optimize_ddp",
     "nccl_priority", "zero2", "scaling", "d_model", "d_ff", "n_layers", "n_heads")))


def same_program() -> tuple[str, ...]:
    """The fields that make a saved run another program when they differ (core.launch.scaling)."""
    return tuple(f.name for f, s in declared(RunSpec) if s.same_program)


def axes() -> dict[str, str]:
    """{field: its plural name in a sweep} for every field a sweep can vary."""
    return {f.name: s.axis for f, s in declared(RunSpec) if s.axis}

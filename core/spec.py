"""RunSpec: everything that defines one benchmark run, and its validation.

Validation errors are one line that names the field and the allowed values, so the CLI and the
launch form can show them as they are.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from pathlib import Path

from perfconsole.model.config import SIZES
from perfconsole.model.sources import ModelError, hf_shapes
from perfconsole.model.sources import parse as parse_model

SIZE_NAMES = (*SIZES, "custom")
PRECISIONS = ("fp32", "bf16", "fp16")
MODES = ("fwd", "fwd_bwd", "train")
ATTENTIONS = ("naive", "sdpa")
DEVICES = ("cuda", "cpu")
PROFILERS = ("none", "nsys", "torch")
OPTIMIZERS = ("fused", "foreach", "forloop")                     # AdamW's implementation
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")   # torch.compile modes
KERNELS = ("torch", "liger")                                     # RMSNorm/SwiGLU/cross-entropy kernels
WEIGHTS = ("fp32", "bf16")                                       # the parameters' (and AdamW state's) dtype
PARALLELS = ("none", "ddp", "fsdp")
COMM_HOOKS = ("none", "bf16")
# torch._dynamo.config.optimize_ddp for a compiled DDP job: split the graph at DDP's buckets (torch's default,
# so the all-reduces can overlap the backward) or compile it whole (the all-reduces after the backward).
OPTIMIZE_DDP = ("ddp_optimizer", "no_optimization")
MAX_NPROC = 64


class SpecError(ValueError):
    """A bad value in a RunSpec; `field` names it, the message says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class RunSpec:
    size: str = "small"
    ctx: int = 256
    batch: int = 4
    precision: str = "fp32"
    mode: str = "fwd_bwd"
    warmup: int = 5
    steps: int = 10
    device: str = "cuda"
    attention: str = "naive"
    compile: bool = False
    tf32: bool = False
    seed: int = 0
    vocab_size: int = 10_000
    profile: str = "none"
    memory: bool = False
    peak_tflops: float | None = None   # overrides the GPU table for MFU
    repeat: int = 1                    # replicate processes, one after the other (core.launch.replicates)
    step_sync: bool = False            # synchronise after every step instead of keeping one in flight
    # Only for size == "custom":
    d_model: int | None = None
    d_ff: int | None = None
    n_layers: int | None = None
    n_heads: int | None = None
    # The optimization ladder's knobs (core.grids.ladder); the defaults are the program measured before them.
    optimizer: str = "fused"           # fused on CUDA (the CPU falls back to foreach), foreach, forloop
    compile_mode: str = "default"      # reduce-overhead = CUDA graphs; only with compile
    kernels: str = "torch"             # liger: liger-kernel's fused kernels (perfconsole[fast])
    fp8: bool = False                  # torchao float8 matmuls (perfconsole[fast], compute capability >= 8.9)
    weights: str = "fp32"              # bf16: parameters, gradients and AdamW state in bf16, no fp32 master copy
    peak_gbps: float | None = None     # overrides the measured memory bandwidth for speed of light
    # Data parallel (core.launch.distributed): nproc processes under torchrun, one GPU each on CUDA.
    nproc: int = 1
    parallel: str = "none"             # none with one process; ddp or fsdp with more
    bucket_mb: float | None = None     # DDP's bucket_cap_mb; None keeps DDP's default (25)
    grad_as_bucket_view: bool = False  # DDP's gradient_as_bucket_view
    comm_hook: str = "none"            # bf16: DDP's bf16_compress_hook
    reshard: bool = True               # FSDP's reshard_after_forward for each block (False: kept gathered)
    fsdp_bf16: bool = False            # FSDP's MixedPrecisionPolicy: gathers and reduce-scatters in bf16
    optimize_ddp: str = "ddp_optimizer"  # how torch.compile treats DDP (OPTIMIZE_DDP); only with compile
    scaling: bool = False              # also run the 1-process spec, for weak-scaling efficiency
    # Where the model comes from (model.sources): builtin, hf:ARCH, PATH.py:FACTORY or package.module:FACTORY,
    # and the free-form KEY=VALUE pairs the hf config or the factory receives.
    model: str = "builtin"
    model_args: tuple[str, ...] = ()

    def dims(self) -> tuple[int, int, int, int]:
        """(d_model, d_ff, n_layers, n_heads) of the model this spec builds; zeros where the spec does not
        say (a factory's model, an hf architecture at its config's defaults: the record's `model` does)."""
        if self.size == "custom":
            return (self.d_model, self.d_ff, self.n_layers, self.n_heads)  # type: ignore[return-value]
        if self.model == "builtin":
            return SIZES[self.size]
        if self.model.startswith("hf:"):
            return hf_shapes.dims(self.model[3:].lower(), self.size) or (0, 0, 0, 0)
        return (0, 0, 0, 0)

    def model_label(self) -> str:
        """The model in a few words: `small`, `hf:llama 1B`, `student_model.py:build`; a custom size with its
        dimensions (`custom d64 ff256 l2 h4`), so that two custom shapes never share a name."""
        size = self.size
        if size == "custom" and None not in (self.d_model, self.d_ff, self.n_layers, self.n_heads):
            size = f"custom d{self.d_model} ff{self.d_ff} l{self.n_layers} h{self.n_heads}"
        if self.model == "builtin":
            return size
        if self.model.startswith("hf:"):
            return f"{self.model} {size}"
        target, _, factory = self.model.rpartition(":")
        return f"{Path(target).name}:{factory}" if target.endswith(".py") else self.model

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.ctx

    def label(self) -> str:
        extra = "".join(f" {x}" for x, on in (("sdpa", self.attention == "sdpa"), ("compile", self.compile),
                                               ("tf32", self.tf32), ("step-sync", self.step_sync),
                                               (self.profile, self.profile != "none")) if on)
        extra += "".join(f" {x}" for x, on in ((f"adamw-{self.optimizer}", self.optimizer != "fused"),
                                                (self.compile_mode, self.compile_mode != "default"),
                                                (self.kernels, self.kernels != "torch"), ("fp8", self.fp8),
                                                (f"{self.weights}-weights", self.weights != "fp32")) if on)
        reps = f" x{self.repeat}" if self.repeat > 1 else ""
        dp = f" {self.parallel}x{self.nproc}" if self.nproc > 1 else ""
        dp += "".join(f" {x}" for x, on in ((f"bucket{self.bucket_mb or 0:g}", self.bucket_mb is not None),
                                             ("bucket-view", self.grad_as_bucket_view),
                                             (f"{self.comm_hook}-hook", self.comm_hook != "none"),
                                             ("no-reshard", not self.reshard), ("fsdp-bf16", self.fsdp_bf16),
                                             ("no-ddp-optimizer", self.optimize_ddp == "no_optimization")) if on)
        return f"{self.model_label()} ctx{self.ctx} b{self.batch} {self.precision} {self.mode}{extra}{dp}{reps}"

    def validate(self) -> RunSpec:
        _validate_model(self)
        _choice("precision", self.precision, PRECISIONS)
        _choice("mode", self.mode, MODES)
        _choice("attention", self.attention, ATTENTIONS)
        _choice("device", self.device, DEVICES)
        _choice("profile", self.profile, PROFILERS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("compile_mode", self.compile_mode, COMPILE_MODES)
        _choice("kernels", self.kernels, KERNELS)
        _choice("weights", self.weights, WEIGHTS)
        if self.compile_mode != "default" and not self.compile:
            raise SpecError("compile_mode", f"{self.compile_mode} needs compile")
        _int_range("ctx", self.ctx, 1, 1 << 20)
        _int_range("batch", self.batch, 1, 1 << 16)
        _int_range("warmup", self.warmup, 0, 100_000)
        if self.compile and self.warmup < 1:  # measured, the compilation would be a step: seconds, against ms
            raise SpecError("warmup", "compile needs at least 1 warm-up step: the first call compiles, which "
                                      "takes seconds and is no step's time")
        _int_range("steps", self.steps, 1, 100_000)
        _int_range("vocab_size", self.vocab_size, 2, 1 << 24)
        _int_range("repeat", self.repeat, 1, 100)
        _int_range("seed", self.seed, 0, 2**63 - 1)
        for name in ("compile", "tf32", "memory", "step_sync", "fp8"):
            if not isinstance(getattr(self, name), bool):
                raise SpecError(name, f"must be true or false, not {getattr(self, name)!r}")
        custom = ("d_model", "d_ff", "n_layers", "n_heads")
        if self.size == "custom" and not _is_factory(self.model):
            missing = [name for name in custom if getattr(self, name) is None]
            if missing:  # name every one that is missing, as the flags that give them
                raise SpecError("size", "custom needs --d-model --d-ff --n-layers --n-heads; missing "
                                + " ".join("--" + name.replace("_", "-") for name in missing))
            for name in custom:
                _int_range(name, getattr(self, name), 1, 1 << 20)
            if self.d_model % self.n_heads:  # type: ignore[operator]
                raise SpecError("n_heads", f"must divide d_model ({self.d_model}), not {self.n_heads}")
            if (self.d_model // self.n_heads) % 2 and self.model == "builtin":  # type: ignore[operator]
                raise SpecError("n_heads", "d_model / n_heads must be even for RoPE")
        else:
            given = [name for name in custom if getattr(self, name) is not None]
            if given:
                raise SpecError(given[0], "only allowed with size custom")
        if self.peak_tflops is not None and (isinstance(self.peak_tflops, bool) or not isinstance(
                self.peak_tflops, (int, float)) or not 0 < self.peak_tflops < 1e6):
            raise SpecError("peak_tflops", f"must be a positive number of TFLOP/s, not {self.peak_tflops!r}")
        if self.peak_gbps is not None and (isinstance(self.peak_gbps, bool) or not isinstance(
                self.peak_gbps, (int, float)) or not 0 < self.peak_gbps < 1e7):
            raise SpecError("peak_gbps", f"must be a positive number of GB/s, not {self.peak_gbps!r}")
        if self.memory and self.device != "cuda":
            raise SpecError("memory", "memory profiling needs device cuda")
        if self.profile == "nsys" and self.device != "cuda":
            raise SpecError("profile", "nsys needs device cuda; use torch on the CPU")
        _validate_parallel(self)
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


def _is_factory(model: object) -> bool:
    return isinstance(model, str) and model != "builtin" and not model.startswith("hf:")


def _validate_model(s: RunSpec) -> None:
    """The model and its size: the builtin sizes, an hf architecture's published sizes (its own list, checked
    without importing transformers), or a factory's, which takes no size and gets model_args instead."""
    try:
        kind, target = parse_model(s.model)
    except ModelError as exc:
        raise SpecError("model", str(exc)) from None
    if not isinstance(s.model_args, tuple) or not all(isinstance(a, str) and "=" in a for a in s.model_args):
        raise SpecError("model_args", f"must be KEY=VALUE pairs, not {s.model_args!r}")
    if kind == "builtin":
        _choice("size", s.size, SIZE_NAMES)
        if s.model_args:
            raise SpecError("model_args", "the builtin model takes none; use --size or the custom dimensions")
    elif kind == "hf":
        allowed = hf_shapes.sizes(target)
        if s.size not in allowed:
            raise SpecError("size", f"hf:{target} has {', '.join(allowed)}, not {s.size!r}")
    else:
        path = target.rpartition(":")[0]
        if path.endswith(".py") and not Path(path).expanduser().is_file():
            raise SpecError("model", f"no file {path}")
        dims = [n for n in ("d_model", "d_ff", "n_layers", "n_heads") if getattr(s, n) is not None]
        if dims:
            raise SpecError(dims[0], "a factory model sets its own shape: pass --model-arg KEY=VALUE instead")


def _choice(field: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(field, f"must be one of {', '.join(allowed)}, not {value!r}")


def _int_range(field: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be an integer from {lo} to {hi}, not {value!r}")
    if not lo <= value <= hi:
        raise SpecError(field, f"must be from {lo} to {hi}, not {value}")


def _validate_fsdp_bf16(s: RunSpec) -> None:
    """FSDP's bf16 parameters and gradients stand in for autocast's casts: they need FSDP, bf16 compute
    and the fp32 master weights they are cast from."""
    if s.parallel != "fsdp":
        raise SpecError("fsdp_bf16", f"is an FSDP setting (bf16 gathers and reduce-scatters); it needs parallel "
                                     f"fsdp, not {s.parallel!r}")
    if s.precision != "bf16":
        raise SpecError("fsdp_bf16", f"computes in bf16; it needs precision bf16, not {s.precision!r}")
    if s.weights != "fp32":
        raise SpecError("fsdp_bf16", "casts fp32 weights to bf16 for each gather; with weights bf16 every "
                                     "collective is bf16 already")


def _validate_parallel(s: RunSpec) -> None:
    """The data-parallel fields: a parallel strategy exactly when there is more than one process."""
    _int_range("nproc", s.nproc, 1, MAX_NPROC)
    _choice("parallel", s.parallel, PARALLELS)
    _choice("comm_hook", s.comm_hook, COMM_HOOKS)
    _choice("optimize_ddp", s.optimize_ddp, OPTIMIZE_DDP)
    for name in ("grad_as_bucket_view", "scaling", "reshard", "fsdp_bf16"):
        if not isinstance(getattr(s, name), bool):
            raise SpecError(name, f"must be true or false, not {getattr(s, name)!r}")
    if s.nproc > 1 and s.parallel == "none":
        raise SpecError("parallel", f"must be ddp or fsdp with nproc {s.nproc}, not 'none'")
    if s.nproc == 1 and s.parallel != "none":
        raise SpecError("parallel", f"must be none with one process, not {s.parallel!r} (give nproc 2 or more)")
    if s.bucket_mb is not None and (isinstance(s.bucket_mb, bool) or not isinstance(s.bucket_mb, (int, float))
                                    or not 0 < s.bucket_mb <= 1 << 16):
        raise SpecError("bucket_mb", f"must be a positive number of MB up to 65536, not {s.bucket_mb!r}")
    ddp_knobs = [n for n, on in (("bucket_mb", s.bucket_mb is not None), ("grad_as_bucket_view",
                 s.grad_as_bucket_view), ("comm_hook", s.comm_hook != "none")) if on]
    if ddp_knobs and s.parallel != "ddp":
        raise SpecError(ddp_knobs[0], f"is a DDP setting; it needs parallel ddp, not {s.parallel!r}")
    if not s.reshard and s.parallel != "fsdp":
        raise SpecError("reshard", f"is an FSDP setting (keep each block gathered); it needs parallel fsdp, "
                                   f"not {s.parallel!r}")
    if s.fsdp_bf16:
        _validate_fsdp_bf16(s)
    if s.optimize_ddp != "ddp_optimizer" and (s.parallel != "ddp" or not s.compile):
        raise SpecError("optimize_ddp", f"is how torch.compile treats DDP; it needs parallel ddp and compile, not "
                                        f"parallel {s.parallel!r}" + ("" if s.compile else " without compile"))
    if s.nproc > 1 and s.mode == "fwd":
        raise SpecError("mode", "data parallel needs gradients: fwd_bwd or train, not fwd")
    if s.nproc > 1 and s.memory:
        raise SpecError("memory", "memory history is recorded for one process; use nproc 1")
    if s.scaling and s.nproc == 1:
        raise SpecError("scaling", "compares against one process; it needs nproc 2 or more")
    if s.nproc > 1 and s.repeat > 1:
        raise SpecError("repeat", "replicate processes are for one process; use repeat 1 with nproc > 1")

"""The rules a RunSpec keeps, checked by `RunSpec.validate()` before any process starts: each field's
choices and type (from its declaration), ranges and the model's shape, then the rules between settings.

A rule between settings has one shape: a setting's `needs` (core.settings), `(value, spec) -> why or None`, and
one reader here: `broken` (every rule a spec breaks), `unmet` (the last-declared of them) and `why_not` (what
a change would newly break). Validation, the launch form's choices, the ladder's rungs and every grid read
them, so nothing offers a value that validation refuses. The worker checks only what this machine can do
(CUDA, compute capability, a package)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfconsole.core.settings.declarations import declared, kind_for
from perfconsole.core.settings.kinds import Flag
from perfconsole.model.config import SIZES
from perfconsole.model.sources import ModelError, hf_shapes
from perfconsole.model.sources import parse as parse_model

SIZE_NAMES = (*SIZES, "custom")
CUSTOM = ("d_model", "d_ff", "n_layers", "n_heads")
MAX_NPROC = 64
RunSpec = Any  # core.settings's, which imports this module: the rules read its fields by name


class SpecError(ValueError):
    """A bad value in a RunSpec; `field` names it, the message says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def validate(s: RunSpec) -> None:
    _validate_model(s)
    for f, st in declared(type(s)):
        value = getattr(s, f.name)
        if st.choices and f.name != "size":
            choice(f.name, value, st.choices)
        if isinstance(kind_for(f), Flag) and not isinstance(value, bool):
            raise SpecError(f.name, f"must be true or false, not {value!r}")
    int_range("ctx", s.ctx, 1, 1 << 20)
    int_range("batch", s.batch, 1, 1 << 16)
    int_range("warmup", s.warmup, 0, 100_000)
    int_range("steps", s.steps, 1, 100_000)
    if s.vocab_size is not None:
        int_range("vocab_size", s.vocab_size, 2, 1 << 24)
    int_range("repeat", s.repeat, 1, 100)
    int_range("seed", s.seed, 0, 2**63 - 1)
    _validate_custom(s)
    _positive("peak_tflops", s.peak_tflops, 1e6, "TFLOP/s")
    _positive("peak_gbps", s.peak_gbps, 1e7, "GB/s")
    _validate_parallel(s)
    for field, why in broken(s)[:1]:  # what each setting needs of the others, the first-declared first
        raise SpecError(field, why)


def broken(s: RunSpec) -> list[tuple[str, str]]:
    """(field, why) for every setting whose needs the spec does not meet, in declaration order."""
    return [(f.name, why) for f, st in declared(type(s)) if st.needs and (why := st.needs(getattr(s, f.name), s))]


def unmet(s: RunSpec) -> tuple[str, str] | None:
    """(field, why) for a setting whose needs the spec does not meet, or None; the last-declared first, so a
    ladder rung's reason is its own change's, not an earlier one's."""
    found = broken(s)
    return found[-1] if found else None


def why_not(s: RunSpec, **change: Any) -> str | None:
    """Why the spec rules this change out: a rule the changed spec breaks that the spec itself keeps (the
    last-declared first, as `unmet`), or None where the rules between settings allow it. A spec that
    validates and a change with None validate together (ranges and choices aside, which are each field's)."""
    before = set(broken(s))
    new = [why for field, why in broken(s.with_(**change)) if (field, why) not in before]
    return new[-1] if new else None


def _validate_custom(s: RunSpec) -> None:
    if s.size == "custom" and s.model_kind != "factory":
        missing = [name for name in CUSTOM if getattr(s, name) is None]
        if missing:  # name every one that is missing, as the flags that give them
            raise SpecError("size", "custom needs --d-model --d-ff --n-layers --n-heads; missing "
                            + " ".join("--" + name.replace("_", "-") for name in missing))
        for name in CUSTOM:
            int_range(name, getattr(s, name), 1, 1 << 20)
        if s.d_model % s.n_heads:  # type: ignore[operator]
            raise SpecError("n_heads", f"must divide d_model ({s.d_model}), not {s.n_heads}")
        if (s.d_model // s.n_heads) % 2 and s.model_kind == "builtin":  # type: ignore[operator]
            raise SpecError("n_heads", "d_model / n_heads must be even for RoPE")
    else:
        given = [name for name in CUSTOM if getattr(s, name) is not None]
        if given:
            raise SpecError(given[0], "only allowed with size custom")


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
        choice("size", s.size, SIZE_NAMES)
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
        dims = [n for n in CUSTOM if getattr(s, n) is not None]
        if dims:
            raise SpecError(dims[0], "a factory model sets its own shape: pass --model-arg KEY=VALUE instead")


def choice(field: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise SpecError(field, f"must be one of {', '.join(allowed)}, not {value!r}")


def int_range(field: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be an integer from {lo} to {hi}, not {value!r}")
    if not lo <= value <= hi:
        raise SpecError(field, f"must be from {lo} to {hi}, not {value}")


def _positive(field: str, value: object, below: float, unit: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < below):
        raise SpecError(field, f"must be a positive number of {unit}, not {value!r}")


def _validate_parallel(s: RunSpec) -> None:
    """The data-parallel fields' own ranges; what they need of each other is their `needs` (below)."""
    int_range("nproc", s.nproc, 1, MAX_NPROC)
    if s.bucket_mb is not None and (isinstance(s.bucket_mb, bool) or not isinstance(s.bucket_mb, (int, float))
                                    or not 0 < s.bucket_mb <= 1 << 16):
        raise SpecError("bucket_mb", f"must be a positive number of MB up to 65536, not {s.bucket_mb!r}")


# What the run's shape and the data-parallel settings need of the rest of the spec, declared as their `needs`
# in core.settings: a parallel strategy exactly when there is more than one process, each wrapper's knobs only
# with that wrapper.
def needs_warmup(v: int, s: RunSpec) -> str | None:
    if s.compile and isinstance(v, int) and v < 1:  # measured, the compilation would be a step: seconds, against ms
        return "compile needs at least 1 warm-up step: the first call compiles, which takes seconds and is no step's time"
    return None


def needs_mode(v: str, s: RunSpec) -> str | None:
    return "data parallel needs gradients: fwd_bwd or train, not fwd" if v == "fwd" and s.nproc > 1 else None


def needs_parallel(v: str, s: RunSpec) -> str | None:
    if s.nproc > 1 and v == "none":
        return f"must be ddp or fsdp with nproc {s.nproc}, not 'none'"
    if s.nproc == 1 and v != "none":
        return f"must be none with one process, not {v!r} (give nproc 2 or more)"
    return None


def needs_ddp(on: Callable[[Any], bool]) -> Callable[[Any, RunSpec], str | None]:
    """A DDP knob's needs: `on(value)` says the knob is turned."""
    return lambda v, s: f"is a DDP setting; it needs parallel ddp, not {s.parallel!r}" \
        if on(v) and s.parallel != "ddp" else None


def needs_reshard(v: bool, s: RunSpec) -> str | None:
    if not v and s.parallel != "fsdp":
        return f"is an FSDP setting (keep each block gathered); it needs parallel fsdp, not {s.parallel!r}"
    return None


def needs_optimize_ddp(v: str, s: RunSpec) -> str | None:
    if v != "ddp_optimizer" and (s.parallel != "ddp" or not s.compile):
        return (f"is how torch.compile treats DDP; it needs parallel ddp and compile, not parallel {s.parallel!r}"
                + ("" if s.compile else " without compile"))
    if v == "python_reducer":
        # compiled autograd traces a backward; DDP's Python reducer calls a comm hook per parameter, not per bucket
        # (bf16_compress_hook takes buckets); CUDA graphs around compiled autograd were never measured here
        if s.mode == "fwd":
            return "traces the backward with compiled autograd; it needs mode fwd_bwd or train, not 'fwd'"
        if s.comm_hook != "none":
            return f"hands DDP's all-reduces to compiled autograd; it needs comm_hook none, not {s.comm_hook!r}"
        if s.compile_mode == "reduce-overhead":
            return "is not measured with CUDA graphs (compile_mode reduce-overhead); use compile_mode default"
    return None


def needs_zero(v: bool, s: RunSpec) -> str | None:
    if not v:
        return None
    if s.parallel != "ddp":  # FSDP shards the optimizer's state already
        return f"shards AdamW's state over a DDP job's ranks; it needs parallel ddp, not {s.parallel!r}"
    if s.mode != "train":
        return f"shards the optimizer; it needs mode train, not {s.mode!r}"
    return None


def needs_zero2(v: bool, s: RunSpec) -> str | None:
    if not v:
        return None
    if s.parallel != "ddp":  # FSDP shards the gradients and the optimizer's state already
        return f"reduce-scatters a DDP job's gradient buckets; it needs parallel ddp, not {s.parallel!r}"
    if s.mode != "train":
        return f"shards the optimizer's step; it needs mode train, not {s.mode!r}"
    if not s.grad_as_bucket_view:
        return "steps each rank's slice as a view of DDP's reduced bucket; it needs grad_as_bucket_view"
    if s.comm_hook != "none":
        return f"is DDP's comm hook itself; it needs comm_hook none, not {s.comm_hook!r}"
    if s.optimize_ddp == "python_reducer":
        return "needs DDP's buckets; compiled autograd (optimize_ddp python_reducer) all-reduces without them"
    if s.zero:
        return "shards the optimizer itself; it cannot run beside zero (ZeRO-1)"
    if s.precision == "fp16":
        return "steps its slices without a gradient scaler; it needs precision fp32 or bf16, not 'fp16'"
    return None


def needs_scaling(v: bool, s: RunSpec) -> str | None:
    return "compares against one process; it needs nproc 2 or more" if v and s.nproc == 1 else None


def needs_repeat(v: int, s: RunSpec) -> str | None:
    if s.nproc > 1 and isinstance(v, int) and v > 1:
        return "replicate processes are for one process; use repeat 1 with nproc > 1"
    return None

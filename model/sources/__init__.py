"""Where the measured model comes from: one small interface over the built-in Transformer, architectures
built from Hugging Face `transformers` config classes, and a user's factory.

`parse(model)` splits the spec's `model` field into a source and its target without importing anything
heavy, so a spec can be validated in the console; `build(request, device)` returns a `Built`: the module,
what it is (`ModelInfo`), and where the model needs them, its own loss and batch maker. The engine uses
the `Built` alone and never asks which source made it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

SOURCES = ("builtin", "hf", "factory")


class ModelError(ValueError):
    """The model cannot be built or does not keep the contract: one line for the user, exit 2."""


def parse(model: str) -> tuple[str, str]:
    """('builtin', ''), ('hf', ARCH) or ('factory', 'PATH.py:FACTORY' | 'package.module:FACTORY')."""
    if not isinstance(model, str) or not model.strip():
        raise ModelError(f"must be builtin, hf:ARCH, PATH.py:FACTORY or package.module:FACTORY, not {model!r}")
    if model == "builtin":
        return "builtin", ""
    if model.startswith("hf:"):
        arch = model[3:].strip()
        if not arch or not all(c.isalnum() or c in "_-" for c in arch):
            raise ModelError(f"hf: needs an architecture name such as hf:llama, hf:qwen2, hf:gpt2, not {model!r}")
        return "hf", arch.lower()
    target, sep, factory = model.rpartition(":")
    if not sep or not target or not factory.isidentifier():
        raise ModelError(f"must be builtin, hf:ARCH, PATH.py:FACTORY or package.module:FACTORY, not {model!r}")
    if not target.endswith(".py") and not all(p.isidentifier() for p in target.split(".")):
        raise ModelError(f"{target!r} is neither a .py file nor a module name (package.module:FACTORY)")
    return "factory", model


@dataclass(frozen=True)
class ModelRequest:
    """What a spec asks of a source: the model string, its size and dimensions, and the free-form args."""
    model: str = "builtin"
    size: str = "small"
    ctx: int = 256
    vocab_size: int | None = None                  # None: the model's own (builtin: 10,000)
    attention: str = "naive"                       # naive | sdpa (hf: eager | sdpa)
    dims: tuple[int | None, int | None, int | None, int | None] = (None, None, None, None)  # custom sizes
    args: tuple[str, ...] = ()                     # KEY=VALUE pairs (--model-arg)


@dataclass(frozen=True)
class ModelInfo:
    """What the measured model is, as the record and every report name it."""
    source: str                      # builtin | hf | factory
    name: str                        # e.g. "builtin small", "hf:llama 1B", "student_model.py:build"
    architecture: str                # e.g. TransformerLM, LlamaForCausalLM, the factory's class name
    params: int                      # trainable parameters
    vocab_size: int                  # the vocabulary the model's logits cover (the batch draws from it)
    origin: str                      # where it came from, in words
    file: str | None = None          # the user's file (factory from a path or a module's file)
    file_sha256: str | None = None   # its content hash, so a report says which version was measured
    attention: str | None = None     # the attention implementation the model runs, where it has a choice
    config: dict[str, Any] = field(default_factory=dict)  # the shape that matters (hf: the config's fields)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Batch = Callable[..., tuple[Any, Any]]
Loss = Callable[[Any, Any], Any]


@dataclass
class Built:
    """A source's answer: the module and what it is; `loss` and `batch` where the model brings its own."""
    module: Any                                  # torch.nn.Module
    info: ModelInfo
    loss: Loss | None = None                     # loss(output, targets) -> scalar tensor
    batch: Batch | None = None                   # batch(batch, ctx, vocab_size, generator) -> (inputs, targets)
    own_ranges: bool = False                     # the model opens its own per-layer ranges (model.annotate)
    # Builds the same model on another device with eager attention (FLOP counting on "meta"); None where
    # the source cannot.
    twin: Callable[[Any], Any] | None = None


def build(request: ModelRequest, device: Any) -> Built:
    """Build the requested model on `device` (a torch.device). Raises ModelError for bad input."""
    kind, _target = parse(request.model)
    if kind == "builtin":
        from perfconsole.model.sources import builtin

        return builtin.build(request, device)
    if kind == "hf":
        from perfconsole.model.sources import hf

        return hf.build(request, device)
    from perfconsole.model.sources import factory

    return factory.build(request, device)


def sizes(model: str) -> tuple[str, ...]:
    """The sizes `--size` may name for this model, read without importing torch or transformers: the
    builtin's, an hf architecture's published ones with default and custom, and none for a factory, which
    sets its own shape. Raises ModelError where the string names no source."""
    kind, target = parse(model)
    if kind == "builtin":
        from perfconsole.model.config import SIZES

        return (*SIZES, "custom")
    if kind == "hf":
        from perfconsole.model.sources import hf_shapes

        return hf_shapes.sizes(target)
    return ()


def check(model: str) -> None:
    """What can be told of the model without building it and without importing torch or transformers (the
    console asks as one types): hf: needs transformers installed with that architecture; a factory's file, or
    its module's top-level package, must exist. Raises ModelError; `build` remains the full check."""
    kind, target = parse(model)
    if kind == "hf":
        from perfconsole.model.sources import hf

        hf.require(target)
    elif kind == "factory":
        from perfconsole.model.sources import factory

        factory.locate(*factory.split(target))


def parse_args(pairs: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs to keyword arguments: integers, floats, true/false and none are converted, the rest
    stay strings. A pair without '=' or with a key that is not a Python name is refused."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = str(pair).partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ModelError(f"model_args: give KEY=VALUE with KEY a Python name, not {pair!r}")
        out[key] = _value(raw.strip())
    return out


def _value(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw

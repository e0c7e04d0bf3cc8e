"""Architectures from Hugging Face `transformers`, built from their config classes with random weights.

Nothing is downloaded: the config is made from keyword arguments (model.sources.hf_shapes holds the
published shapes), the model with `from_config`, and the hub is switched off for the process
(HF_HUB_OFFLINE), so code that would reach it fails at once instead of waiting on the network.
`--model-arg KEY=VALUE` sets any field the config class has (num_key_value_heads=4, rope_theta=...);
a key it lacks is refused, since config classes would otherwise keep it silently.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from perfconsole.model.sources import Built, ModelError, ModelInfo, ModelRequest, parse, parse_args
from perfconsole.model.sources.hf_shapes import DIM_FIELDS, GPT2_DIM_FIELDS, SHAPES, sizes

INSTALL = "pip install 'perfconsole[hf]' (transformers)"
ATTN = {"naive": "eager", "sdpa": "sdpa"}          # perfconsole's --attention to attn_implementation
POSITION_FIELDS = ("max_position_embeddings", "n_positions")
SHOWN = ("model_type", "hidden_size", "n_embd", "intermediate_size", "n_inner", "num_hidden_layers", "n_layer",
         "num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")


def offline() -> None:
    """The hub off for this process, before transformers is imported (it reads these at import)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def require(arch: str) -> None:
    """transformers is installed and has `arch`, read from its files without importing it (that imports
    torch: seconds, too long to wait on at each key typed in the console). An architecture is a model folder
    with its configuration module, or a name the auto-mapping modules quote (aliases such as gpt-sw3). A name
    passed here can still fail to build; a name refused here is one transformers does not have."""
    if not available():
        raise ModelError(f"model: hf:{arch} needs transformers, which is not installed: {INSTALL}")
    if arch not in _architectures():
        raise ModelError(f"model: transformers has no architecture {arch!r} (e.g. llama, qwen2, qwen3, gpt2, mistral)")


@functools.lru_cache(maxsize=1)
def _architectures() -> frozenset[str]:
    spec = importlib.util.find_spec("transformers")
    models = Path(next(iter(spec.submodule_search_locations or ()), "")) / "models" if spec else Path("/nonexistent")
    names = {d.name for d in models.iterdir() if (d / f"configuration_{d.name}.py").is_file()} if models.is_dir() else set()
    names |= {n.replace("_", "-") for n in names}
    for module in ("configuration_auto.py", "auto_mappings.py"):
        try:
            text = (models / "auto" / module).read_text(errors="replace")
        except OSError:
            continue
        names |= set(re.findall(r'"([a-z0-9_-]+)"\s*[:,]\s*"\w*Config"', text))  # ("llama", "LlamaConfig")
    return frozenset(names)


def make_config(request: ModelRequest) -> Any:
    """The config class instance for the request: a published shape, the class defaults or custom dims."""
    _kind, arch = parse(request.model)
    if not available():
        raise ModelError(f"model: hf:{arch} needs transformers, which is not installed: {INSTALL}")
    offline()
    import transformers

    try:
        defaults = transformers.AutoConfig.for_model(arch)
    except (ValueError, KeyError):
        raise ModelError(f"model: transformers {transformers.__version__} has no architecture {arch!r} "
                         f"(e.g. llama, qwen2, qwen3, gpt2, mistral)") from None
    if request.size not in sizes(arch):
        raise ModelError(f"size: hf:{arch} has {', '.join(sizes(arch))}, not {request.size!r}")
    kwargs: dict[str, Any] = dict(SHAPES.get(arch, {}).get(request.size, {}))
    if request.size == "custom":
        names = GPT2_DIM_FIELDS if hasattr(defaults, "n_embd") else DIM_FIELDS
        kwargs.update({n: v for n, v in zip(names, request.dims) if v is not None})
        kwargs["vocab_size"] = 10_000 if request.vocab_size is None else request.vocab_size  # a custom shape's
        if hasattr(defaults, "num_key_value_heads"):
            kwargs["num_key_value_heads"] = request.dims[3]
    args = parse_args(request.args)
    unknown = [k for k in args if not hasattr(defaults, k)]
    if unknown:
        raise ModelError(f"model_args: {type(defaults).__name__} has no field {unknown[0]!r}")
    kwargs.update(args)
    for name in POSITION_FIELDS:  # room for the context length
        if hasattr(defaults, name) and int(kwargs.get(name, getattr(defaults, name)) or 0) < request.ctx:
            kwargs[name] = request.ctx
    kwargs["use_cache"] = False  # training and timing: no KV cache is kept
    try:
        return transformers.AutoConfig.for_model(arch, **kwargs)
    except (ValueError, TypeError) as exc:
        raise ModelError(f"model: {type(defaults).__name__} refused the shape: {str(exc).splitlines()[0]}") from None


def from_config(config: Any, attention: str, device: Any) -> Any:
    """A model of its own copy of `config`: transformers writes the attention implementation into the config
    it is given, and the modules read it at every forward, so an eager twin built from a shared config
    would turn the measured model's SDPA into eager attention too."""
    import copy

    import torch
    import transformers

    with torch.device(device):
        try:
            return transformers.AutoModelForCausalLM.from_config(copy.deepcopy(config), attn_implementation=attention)
        except ValueError as exc:  # e.g. an architecture without a causal-LM head, or without sdpa
            raise ModelError(f"model: {config.model_type}: {str(exc).splitlines()[0]}") from None


def build(request: ModelRequest, device: Any) -> Built:
    config = make_config(request)
    attention = ATTN.get(request.attention, request.attention)
    module = from_config(config, attention, device)
    shown = {k: getattr(config, k) for k in SHOWN if getattr(config, k, None) is not None}
    import transformers

    info = ModelInfo("hf", f"{request.model} {request.size}", type(module).__name__,
                     sum(p.numel() for p in module.parameters() if p.requires_grad), int(config.vocab_size),
                     f"transformers {transformers.__version__} {type(config).__name__}, random weights",
                     attention=attention, config=shown)
    return Built(module, info, twin=lambda on: from_config(config, "eager", on))

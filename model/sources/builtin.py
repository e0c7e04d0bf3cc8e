"""The built-in Transformer (model.transformer) as a source: today's model and sizes, unchanged."""
from __future__ import annotations

from typing import Any

from perfconsole.model.config import BUILTIN_VOCAB, SIZES, ModelConfig
from perfconsole.model.sources import Built, ModelError, ModelInfo, ModelRequest


def config(request: ModelRequest) -> ModelConfig:
    if request.size == "custom":
        d_model, d_ff, n_layers, n_heads = request.dims
    elif request.size in SIZES:
        d_model, d_ff, n_layers, n_heads = SIZES[request.size]
    else:
        raise ModelError(f"size: the builtin model has {', '.join((*SIZES, 'custom'))}, not {request.size!r}")
    vocab = BUILTIN_VOCAB if request.vocab_size is None else request.vocab_size
    return ModelConfig(d_model, d_ff, n_layers, n_heads, vocab, request.ctx)  # type: ignore[arg-type]


def build(request: ModelRequest, device: Any) -> Built:
    import torch

    from perfconsole.model.transformer import TransformerLM

    if request.args:
        raise ModelError("model_args: the builtin model takes none; its size flags set its shape")
    cfg = config(request)
    with torch.device(device):  # build on the device: no host copy of a multi-GB model
        module = TransformerLM(cfg, request.attention)

    def twin(on: Any) -> Any:
        with torch.device(on):
            return TransformerLM(cfg, "naive")

    info = ModelInfo("builtin", f"builtin {request.size}", "TransformerLM",
                     sum(p.numel() for p in module.parameters() if p.requires_grad), cfg.vocab_size,
                     "perfconsole.model.transformer", attention=request.attention,
                     config={"d_model": cfg.d_model, "d_ff": cfg.d_ff, "n_layers": cfg.n_layers,
                             "n_heads": cfg.n_heads, "vocab_size": cfg.vocab_size, "context_length": cfg.context_length})
    return Built(module, info, own_ranges=True, twin=twin)

"""Activation checkpointing (`--checkpoint blocks`): each repeated block of the model (the children of its
largest nn.ModuleList, as the per-layer ranges find them: the builtin's blocks, an hf architecture's
decoder layers, a factory's `h`) keeps only its inputs in the forward and recomputes its activations in
the backward (torch.utils.checkpoint, non-reentrant). Less memory, about one more forward of time.

FLOPs are counted before this applies, so MFU counts the model's FLOPs, not the recomputation.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from perfconsole.core.measure import Unsupported
from perfconsole.core.measure.model_build import repeated_blocks


def apply(value: str, model: nn.Module) -> int:
    """Checkpoint each repeated block in place; returns how many. Unsupported where the model has none."""
    if value == "none":
        return 0
    blocks = repeated_blocks(model)
    if not blocks:
        raise Unsupported("checkpoint blocks: the model has no repeated blocks (an nn.ModuleList of layers)")
    for _, block in blocks:
        block.forward = _checkpointed(block.forward)
    return len(blocks)


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():  # an inference forward keeps nothing for a backward anyway
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    return run

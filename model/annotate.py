"""The one hook the model has for profilers: named ranges that cost nothing unless switched on.

The engine installs a range factory (NVTX or torch.profiler.record_function) while profiling; otherwise
`annotate(name)` returns a shared no-op context manager. The factory is kept here once: the engine opens its
phase ranges (forward, backward, optimizer step) with `phase(name)` from the same factory, and may keep the
model's own per-layer ranges off (a compiled model: its ranges would break the graph) while its phases open.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import ContextManager

NULL = contextlib.nullcontext()
_factory: Callable[[str], ContextManager] | None = None
_model_ranges = False


def annotate(name: str) -> ContextManager:
    """A range of the model's own (a layer, a sublayer): open only while the model's ranges are on. The switch is
    read first, and alone while it is off: a compiled model (its ranges off) then guards on the switch only, so
    installing a factory for its phases does not recompile it."""
    return NULL if not _model_ranges or _factory is None else _factory(name)


def phase(name: str) -> ContextManager:
    """A range around the model (a step's phase): open whenever a factory is installed."""
    return NULL if _factory is None else _factory(name)


def set_range_factory(factory: Callable[[str], ContextManager] | None, model_ranges: bool = True) -> None:
    """Install (or with None remove) the factory that opens a named range; the model's own ranges open
    through it only with `model_ranges`."""
    global _factory, _model_ranges
    _factory = factory
    _model_ranges = model_ranges


def factory() -> Callable[[str], ContextManager] | None:
    """The factory installed now, or None."""
    return _factory


def enabled() -> bool:
    """Whether the model's own ranges open."""
    return _factory is not None and _model_ranges

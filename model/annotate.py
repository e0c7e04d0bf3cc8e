"""The one hook the model has for profilers: named ranges that cost nothing unless switched on.

The engine installs a range factory (NVTX or torch.profiler.record_function) while profiling; otherwise
`annotate(name)` returns a shared no-op context manager.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import ContextManager

_NULL = contextlib.nullcontext()
_factory: Callable[[str], ContextManager] | None = None


def annotate(name: str) -> ContextManager:
    return _NULL if _factory is None else _factory(name)


def set_range_factory(factory: Callable[[str], ContextManager] | None) -> None:
    """Install (or with None remove) the factory that opens a named range."""
    global _factory
    _factory = factory


def enabled() -> bool:
    return _factory is not None

"""Modules loaded on their first use. pandas, with numpy and pyarrow, took 0.85 of the 1.39 CPU-s a console's
imports cost on the 2-core machine (docs/results/console_start.md), and the modules a console or a command
imports at its start use them only once a profile's tables are read, drawn or exported: `perfconsole` opens its
launch form without them, as `perfconsole run` starts its run (tests/core/profiling/test_lazy_imports.py keeps
it so)."""
from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

__all__ = ["HAS_ARROW", "LazyModule", "numpy", "pandas"]


class LazyModule:
    """Stands for the module `name` and imports it at the first attribute asked of it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<{self._name}, {'loaded' if self._module is not None else 'loaded on first use'}>"


pandas = LazyModule("pandas")
numpy = LazyModule("numpy")
# pandas reads CSVs with pyarrow's engine where it is installed (pyarrow is optional): asked without importing it
HAS_ARROW = importlib.util.find_spec("pyarrow") is not None

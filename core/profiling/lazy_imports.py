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


class LazyModule(ModuleType):
    """Stands for the module `name` and imports it at the first attribute asked of it. Then it takes the module's
    attributes as its own, so every later `pd.DataFrame` is a plain attribute read, not a call of this class."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "_module":
            raise AttributeError(attr)
        if self._module is None:
            module = importlib.import_module(self.__name__)
            self.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
            self._module = module
        return getattr(self._module, attr)  # one the module had not yet when it was copied (a lazy submodule)

    def __repr__(self) -> str:
        return f"<{self.__name__}, {'loaded' if self._module is not None else 'loaded on first use'}>"


pandas = LazyModule("pandas")
numpy = LazyModule("numpy")
# pandas reads CSVs with pyarrow's engine where it is installed (pyarrow is optional): asked without importing it
HAS_ARROW = importlib.util.find_spec("pyarrow") is not None

"""torch.compile's caches, kept per data folder: a compiled rerun loads what an earlier run compiled.

inductor keeps its FX graph cache and AOTAutograd's cache under TORCHINDUCTOR_CACHE_DIR; the worker points it at
a folder of the data folder named for the torch version (core.paths.compile_cache_dir), before anything compiles,
so another torch never reads it. Whether the run's compile was served from it is inductor's own count of FX
graph cache hits and misses during the warm-up: `hit` (every graph loaded), `miss` (every graph compiled), or
`partial`."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from perfconsole.core import paths

VARIABLE = "TORCHINDUCTOR_CACHE_DIR"


def point() -> Path:
    """Point inductor's caches at this torch's folder of the data folder; the folder."""
    import torch

    folder = paths.compile_cache_dir(torch.__version__)
    folder.mkdir(parents=True, exist_ok=True)
    os.environ[VARIABLE] = str(folder)
    utils = sys.modules.get("torch._inductor.utils")
    if utils is not None:  # a worker forked from a warm process: paths inductor remembered from before go
        utils.clear_caches()
    return folder


def _counts() -> tuple[int, int]:
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0, 0
    inductor = utils.counters["inductor"]
    return inductor["fxgraph_cache_hit"], inductor["fxgraph_cache_miss"]


class Watch:
    """The FX graph cache's hits and misses from now on."""

    def __init__(self) -> None:
        self.before = _counts()

    def verdict(self) -> str | None:
        """hit | miss | partial, or None where nothing was looked up in the cache."""
        hits, misses = (now - then for now, then in zip(_counts(), self.before))
        if not hits and not misses:
            return None
        return "hit" if not misses else "miss" if not hits else "partial"

"""torch.compile's caches, kept per data folder: a compiled rerun loads what an earlier run compiled.

inductor keeps its FX graph cache and AOTAutograd's cache under TORCHINDUCTOR_CACHE_DIR; the worker points it at
a folder of the data folder named for the torch version (core.paths.compile_cache_dir), before anything compiles,
so another torch never reads it. Whether the run's compile was served from it is inductor's own count of FX
graph cache hits and misses during the warm-up: `hit` (every graph loaded), `miss` (every graph compiled), or
`partial`; and where AOTAutograd bypassed its cache (a graph it cannot cache, such as one calling a function it
does not know, is traced again on every start though inductor then loads it) or missed beside a `hit`, its own
counts after a `;`: `hit; AOTAutograd 0 hit, 0 miss, 2 bypass`."""
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


def _counts() -> tuple[int, ...]:
    """inductor's FX graph cache hits and misses, then AOTAutograd's cache hits, misses and bypasses."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0, 0, 0, 0, 0
    inductor, aot = utils.counters["inductor"], utils.counters["aot_autograd"]
    return (inductor["fxgraph_cache_hit"], inductor["fxgraph_cache_miss"], aot["autograd_cache_hit"],
            aot["autograd_cache_miss"], aot["autograd_cache_bypass"])


class Watch:
    """The FX graph cache's (and AOTAutograd's cache's) hits and misses from now on."""

    def __init__(self) -> None:
        self.before = _counts()

    def verdict(self) -> str | None:
        """hit | miss | partial, with AOTAutograd's counts after a `;` where it bypassed its cache for a graph, or
        missed beside a `hit`; None where nothing was looked up in the FX graph cache."""
        hits, misses, aot_hits, aot_misses, bypasses = (now - then for now, then in zip(_counts(), self.before))
        if not hits and not misses:
            return None
        fx = "hit" if not misses else "miss" if not hits else "partial"
        if not bypasses and not (fx == "hit" and aot_misses):  # AOTAutograd's misses come with inductor's
            return fx
        return f"{fx}; AOTAutograd {aot_hits} hit, {aot_misses} miss, {bypasses} bypass"

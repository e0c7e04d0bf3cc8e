"""`LoadedProfile`: a run's profile loaded once, its analyses views over it (as HTA's `TraceAnalysis` holds a
trace and each analysis is a method on it).

Each table's DataFrame is built the first time a view reads it and kept, with what is derived from it (the
kernels' categories, the category shares), so the Kernels pane's rows, bars and headline, the NVTX pane's
ranges and each range's kernels, and a report's sections read one set of frames. A record's profile hands out
its own (`core.record.Profile.loaded`). The analyses themselves are core.profiling.analyses' and
attribution's: they take the profile's frames where a caller has them, a plain mapping of tables otherwise.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from perfconsole.core.profiling import analyses
from perfconsole.core.profiling.attribution import Attribution, attribute
from perfconsole.core.profiling.categories import categorize_column
from perfconsole.core.profiling.lazy_imports import pandas as pd
from perfconsole.core.profiling.ncu_summary import REPLAY
from perfconsole.core.profiling.table import Row, TableFrames

KERNELS = "cuda_gpu_kern_sum"


class LoadedProfile:
    """One profile's tables and the views of them: kernels (with their categories), NVTX ranges, category and
    phase shares, top kernels overall and per range, softmax against the attention matmuls, the forward
    check, and kernel time per phase (the attribution)."""

    def __init__(self, profiler: str | None, tables: Mapping[str, Sequence[Row]]) -> None:
        self.profiler = profiler
        self.frames = TableFrames(tables)

    @property
    def tables(self) -> Mapping[str, Sequence[Row]]:
        return self.frames.tables

    def rows(self, name: str) -> Sequence[Row]:
        """The named table's rows; empty where it is absent."""
        return self.tables.get(name) or []

    def frame(self, name: str) -> pd.DataFrame | None:
        return self.frames.frame(name)

    @property
    def replay(self) -> bool:
        """The kernel times are Nsight Compute's replay durations (an import of its pages alone: core.profiling.
        ncu_summary marks its summary so)."""
        run = self.rows("ncu_run")
        return bool(self.rows(KERNELS)) and bool(run) and run[0].get("kernel_times") == REPLAY

    @property
    def categories(self) -> pd.Series | None:
        """The kernels' categories, a categorical Series in table order (index 0..n-1); None without kernels."""
        return self.frames.view(KERNELS, "categories", lambda f: categorize_column(f["name"].reset_index(drop=True)))

    def kernels(self) -> pd.DataFrame:
        """The kernel table with a `category` column, in table order (index 0..n-1); empty without kernels."""
        frame = self.frames.view(KERNELS, "kernels", lambda f: f.reset_index(drop=True).assign(category=self.categories))
        return frame if frame is not None else pd.DataFrame()

    def category_shares(self) -> list[analyses.CategoryShare]:
        shares = self.frames.view(KERNELS, "shares", lambda _: analyses.category_shares(self.frames, self.categories))
        return shares if shares is not None else []

    def phase_shares(self, phases: tuple[str, ...] = analyses.PHASES) -> list[analyses.PhaseShares]:
        return analyses.phase_shares(self.frames, phases)

    def top_kernels(self, range_name: str | None = None, n: int = 10) -> analyses.RangeTopKernels:
        return analyses.top_kernels(self.frames, range_name, n)

    def top_kernels_per_range(self, ranges: tuple[str, ...] = analyses.PHASES,
                              n: int = 5) -> list[analyses.RangeTopKernels]:
        return analyses.top_kernels_per_range(self.frames, ranges, n)

    def softmax_vs_matmuls(self) -> analyses.SoftmaxVsMatmuls | None:
        return analyses.softmax_vs_matmuls(self.frames)

    def forward_check(self, timed_forward_ms: float, steps: int | None = None) -> analyses.ForwardCheck | None:
        return analyses.forward_check(self.frames, timed_forward_ms, steps)

    def attribution(self, steps: int | None = None, timed_ms: Mapping[str, float | None] | None = None,
                    host_ms: Mapping[str, float | None] | None = None) -> Attribution | None:
        return attribute(self.frames, steps, timed_ms, host_ms)

    @property
    def mostly_aten(self) -> bool:
        """Most kernel time in `aten::` ops: the rows are CPU ops, not GPU kernels."""
        return bool(self.frames.view(KERNELS, "mostly_aten", lambda _: analyses.mostly_aten(self.frames)))

    def row_units(self, device: str) -> str:
        """What the kernel table's rows are: "kernels", or "CPU ops" (a CPU run's torch profile, or such an import)."""
        return analyses.row_units(self.profiler, device, self.frames)

    def __repr__(self) -> str:
        return f"LoadedProfile({self.profiler}: {', '.join(self.tables)})"


def loaded_of(profile: Any) -> LoadedProfile:
    """A record's profile (core.record.Profile) loaded once: its tables' frames built on first use and kept, its
    analyses views of them. The same object for as long as the profile holds the same tables; kept on the profile
    itself, since the record's vocabulary may not import this part (tests/core/test_layers.py)."""
    held = profile.__dict__.get("_loaded")
    if held is None or held.tables is not profile.tables or held.profiler != profile.profiler:
        held = profile.__dict__["_loaded"] = LoadedProfile(profile.profiler, profile.tables)
    return held

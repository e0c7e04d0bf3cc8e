"""A record's profile is loaded once: the Kernels and NVTX panes build each table's DataFrame once per record,
however many views (rows, categories, shares, the phase headline, a range's kernels) read it.

The count goes through the real code: `frame_of`, the one function that turns a table's rows into a frame,
wrapped wherever a perfconsole module holds it, while the panes show a real record saved by an nsys run (its
tables are rows read back from JSON, each a frame to build). `rooms` measures how far drawing the record
travels: the perfconsole modules entered and the calls from one module into another."""
from __future__ import annotations

import contextlib
import sys
from collections import Counter

import pytest
from console_helpers import ROOT, make_app

from perfconsole.core import store
from perfconsole.core.profiling import table
from perfconsole.tui.panes.profile_tables import KernelsPane, NvtxPane

RUN = ROOT / "tests" / "fixtures" / "nsys_perfconsole" / "h200_2.7B_compiled_nsys_run.json"


@pytest.fixture
def frame_builds(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Table name -> frames built from its rows, while the test runs (names filled in by `named`)."""
    real = table.frame_of
    built: Counter = Counter()

    def counting(t):
        if isinstance(t, list) and t:  # rows read back from JSON: a frame is built (a ProfileTable has its own)
            built[id(t)] += 1
        return real(t)

    for name, module in list(sys.modules.items()):
        if name.startswith("perfconsole."):
            for attr, value in list(vars(module).items()):
                if value is real:
                    monkeypatch.setattr(module, attr, counting)
    return built


def named(built: Counter, record) -> dict[str, int]:
    """The record's tables built (rows a view derives, such as a range's top kernels, are not the record's)."""
    names = {id(rows): name for name, rows in record.profile.tables.items()}
    return {names[i]: n for i, n in built.items() if i in names}


def rooms(call) -> dict[str, object]:
    """How far `call()` travels in perfconsole's core, on this thread: the core modules it enters (`modules`),
    the calls into a core module from another perfconsole module (`crossings`), all calls of core functions
    (`calls`), and the core modules that the Kernels and NVTX panes' own module calls into (`doors`)."""
    entered: set[str] = set()
    doors: set[str] = set()
    counts = Counter()

    def profile(frame, event, _arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("perfconsole.core."):
            return
        entered.add(module)
        counts["calls"] += 1
        back = frame.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        if caller != module and caller.startswith("perfconsole."):
            counts["crossings"] += 1
        if caller == PANES:
            doors.add(module.removeprefix("perfconsole."))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return {"modules": len(entered), "crossings": counts["crossings"], "calls": counts["calls"], "doors": sorted(doors)}


PANES = "perfconsole.tui.panes.profile_tables"


@contextlib.asynccontextmanager
async def pane_of(kind):
    """(the console's pane of this kind, the record it is to show, the pilot), the record not yet shown."""
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        yield app.query_one(kind), store.load(RUN), pilot


async def test_kernels_pane_builds_each_table_frame_once_per_record(frame_builds):
    async with pane_of(KernelsPane) as (pane, record, pilot):
        pane.show_record(record)
        await pilot.pause()
        # The kernel table (its rows, categories, bars, the phase headline) and the NVTX-kernel projection
        # (the headline's three phases) each once.
        assert named(frame_builds, record) == {"cuda_gpu_kern_sum": 1, "nvtx_kern_sum": 1}
        pane.show_record(record)  # the same record again (the console redraws on every run event)
        assert named(frame_builds, record) == {"cuda_gpu_kern_sum": 1, "nvtx_kern_sum": 1}
        assert "forward" in pane.title_text and len(pane.query_one("#kernel-table").shown) == 45


async def test_nvtx_pane_builds_the_range_kernels_frame_once_across_ranges(frame_builds):
    async with pane_of(NvtxPane) as (pane, record, pilot):
        pane.show_record(record)
        await pilot.pause()  # the table's cursor shows its first range
        for name in ("forward", "backward", "optimizer_step", "forward"):
            pane._show_range(name)
        # The ranges' table once, the NVTX-kernel projection once for the four ranges.
        assert named(frame_builds, record) == {"nvtx_sum": 1, "nvtx_kern_sum": 1}
        assert str(pane.query_one("#range-title").content).startswith("kernels in forward")
        assert len(pane.query_one("#range-kernels").shown) > 0


async def test_the_kernels_pane_reads_a_record_through_its_loaded_profile():
    """The pane enters core through the record's profile, loaded once (core.profiling.loaded), and the headline's
    text: not through each analysis module (category_rules, category_frames, table, ncu_summary) as it did."""
    async with pane_of(KernelsPane) as (pane, record, _pilot):
        first = rooms(lambda: pane.show_record(record))
        again = rooms(lambda: pane.show_record(record))
        print(f"Kernels pane, a record shown: {first}; shown again: {again}")
        assert first["doors"] == again["doors"] == ["core.profiling.loaded", "core.reports.profile"]
        # 9 core modules and 129 crossings on the first show, 7 and 54 on the next, before the categories were one
        # module (rules and columns) and pandas' stand-in stopped being called once loaded (lazy_imports)
        assert first["modules"] <= 7 and again["modules"] <= 5 and again["crossings"] <= 42

"""A million-row kernel table in the console: only the rows in view are ever formatted, and the table
scrolls to its end, sorts and filters as a small one does (tui/widgets/table_rows.py)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from console_helpers import fixture_profile_record, make_app
from textual.widgets import Static

from perfconsole.core.profiling.table import ProfileTable
from perfconsole.tui.widgets.sortable_table import SortableTable
from perfconsole.tui.widgets.table_rows import BLOCK, KEPT_BLOCKS

N = 1_000_000


def big_record():
    base = fixture_profile_record()
    names = [r["name"] for r in base.profile.tables["cuda_gpu_kern_sum"]]
    rng = np.random.default_rng(0)
    total = np.sort(rng.integers(1_000, 10**10, N))[::-1]
    count = rng.integers(1, 5_000, N)
    frame = pd.DataFrame({"time_pct": np.round(100 * total / total.sum(), 1), "total_time_ns": total,
                          "instances": count, "avg_ns": total // count,
                          "name": pd.Series([f"{names[i % len(names)]}_{i}" for i in range(N)], dtype="str")})
    base.id, base.name = "big", "a million kernels"
    base.profile.tables = {"cuda_gpu_kern_sum": ProfileTable(frame)}
    return base, frame


async def test_a_million_kernels_draw_only_what_shows():
    record, frame = big_record()
    app = make_app()
    built: list[int] = []
    async with app.run_test(size=(120, 34)) as pilot:
        table = app.query_one("#kernel-table", SortableTable)
        app.session.add(record)
        app.session.show(record)
        app.show_current()
        await pilot.press("3")
        await pilot.pause()
        # every number drawn goes through its column's format: count them from here on (a table that
        # built all its rows formatted a million of each)
        def counting(fmt):
            return lambda v: built.append(1) or fmt(v)
        table.cols = [replace(c, fmt=counting(c.fmt)) if c.numeric else c for c in table.cols]
        table.refill()
        await pilot.pause()
        assert table.row_count == N and len(table.shown) == N
        assert f"{N} kernels" in str(app.query_one("#kernels-title", Static).content)
        assert table.current_row()["name"] == frame["name"].iloc[0] and str(table.get_row_at(0)[-1]).endswith(")_0")
        # End: the last row, formatted when it comes into view
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == N - 1 and table.current_row()["name"] == frame["name"].iloc[-1]
        # Sort by count (largest first), then by name; each row is the frame's, in the frame's own order
        table.move_cursor(row=0, column=1)
        await pilot.press("s")
        await pilot.pause()
        top = table.current_row()
        assert top["instances"] == frame["instances"].max()
        assert table.get_row_at(0)[1].plain == f"{frame['instances'].max():,}"
        table.move_cursor(row=0, column=5)
        await pilot.press("s")
        await pilot.pause()
        assert table.current_row()["name"] == frame["name"].str.lower().min()
        # A filter keeps the sort; the rows it keeps are the frame's rows that match
        await pilot.press("slash", *"nccl")
        await pilot.pause()
        shown = table.shown
        want = frame["name"].str.lower().str.contains("nccl", regex=False)
        assert len(shown) == int(want.sum()) > 0
        first = shown[:50]
        assert all("nccl" in r["name"].lower() for r in first)
        assert [r["name"] for r in first] == sorted((r["name"] for r in first), key=str.lower)
        # Everything above formatted a few screens of rows (4 numbers each), out of a million
        assert 0 < len(built) <= 4 * 12 * KEPT_BLOCKS * BLOCK

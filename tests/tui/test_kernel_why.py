"""Enter on a row of the Kernels table opens why that kernel takes its time (Nsight Compute), at 80x24 and
120x40, on the snapshot of a real `--profile ncu` run (tests/fixtures/ncu/small_train_h100.json, an H100)."""
from __future__ import annotations

import io

import pytest
from console_helpers import ROOT, make_app, screen_lines

from rich.console import Console

from perfconsole.core import store
from perfconsole.core.reports.roofline import HEIGHT
from perfconsole.tui.screens.kernel_why import KernelWhyScreen
from perfconsole.tui.widgets.sortable_table import SortableTable

FIXTURE = ROOT / "tests" / "fixtures" / "ncu" / "small_train_h100.json"
GEMM = "nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN"


async def _open_on(app, pilot, name: str) -> None:
    record = store.load(FIXTURE)
    app.session.add(record)
    app.session.show(record)
    app.show_current()
    app.refresh_runs()
    await pilot.pause()
    await pilot.press("3")
    await pilot.pause()
    table = app.query_one("#kernel-table", SortableTable)
    table.focus()
    table.move_cursor(row=next(i for i, r in enumerate(table.shown) if r["name"] == name))
    await pilot.pause()
    await pilot.press("enter")
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_enter_on_a_kernel_opens_its_why(size):
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _open_on(app, pilot, GEMM)
        assert isinstance(app.screen, KernelWhyScreen)
        text = "\n".join(screen_lines(app))
        assert GEMM in text
        for words in ("compute    42.7 %", "memory     76.6 %", "bound      memory", "410.9 TFLOP/s bf16",
                      "52.4 % of the measured peak"):
            assert words in text, words
        if size == (120, 40):  # the whole view fits: the rule and the rules ncu applied
            assert "TheoreticalOccupancy (est. 81.2 %)" in text and "rules" in text
        # the roofline picture closes the view, this kernel drawn as @, its axes within the view's width
        view = app.screen.query_one("#why-roofline")
        console = Console(width=view.content_region.width, record=True, file=io.StringIO())
        console.print(view.content)
        body = console.export_text()
        words = " ".join(body.split())  # the legend wraps at 80 columns; the axes do not
        assert body.startswith("roofline (log-log)") and "FLOP/byte" in words and "@ the kernel shown" in words
        grid = [line for line in body.splitlines() if " |" in line]
        assert len(grid) == HEIGHT and sum(line.count("@") for line in grid) == 1
        assert all(len(line.rstrip()) <= view.content_region.width for line in grid)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, KernelWhyScreen)


async def test_a_kernel_ncu_did_not_profile_says_so():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _open_on(app, pilot, "nvjet_sm90_tst_96x64_64x10_1x2_h_bz_TNN")
        assert isinstance(app.screen, KernelWhyScreen)
        assert "Nsight Compute did not profile this kernel" in "\n".join(screen_lines(app))

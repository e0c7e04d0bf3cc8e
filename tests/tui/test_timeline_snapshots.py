"""SVG snapshots of the Timeline pane on the real H200 trace (llama 1B, CUDA graphs, 3 steps) at 80x24 and 120x40:
a step fitted and a kernel selected. Update with `pytest tests/tui/test_timeline_snapshots.py --snapshot-update`
after checking the new SVGs."""
from __future__ import annotations

import pytest
from console_helpers import make_app
from test_timeline_pane import _open


@pytest.mark.parametrize("size", [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")])
def test_timeline_a_step_fitted_and_a_kernel_selected(snap_compare, size):
    async def before(pilot):
        await _open(pilot)
        await pilot.press("s", "2", "enter", "n", "n")
        await pilot.pause()
    assert snap_compare(make_app(), terminal_size=size, run_before=before)


def test_timeline_ascii_with_launches(snap_compare):
    async def before(pilot):
        await _open(pilot)
        await pilot.press("s", "3", "enter", "l")
        await pilot.pause()
    assert snap_compare(make_app(ascii_only=True), terminal_size=(120, 40), run_before=before)

"""SVG snapshots of every screen at fixed sizes, built from the shipped example records and real nsys
fixtures, with no GPU sampler: nothing on screen depends on the clock, the host or this run's timings.
Update with `pytest tests/tui/test_snapshots.py --snapshot-update` after checking the new SVGs."""
from __future__ import annotations

import pytest
from console_helpers import ROOT, fixture_profile_record, make_app, shipped, wait_for

EXAMPLES = ["tiny-cpu-train-fp32.json", "tiny-cpu-train-bf16.json", "tiny-cpu-fwd-ctx64.json",
            "tiny-cpu-train-torch-profile.json"]
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 34), id="120x34")]
GRIDS = ROOT / "tests" / "fixtures" / "grids"   # real H200 sweep and (partial) attention grid


def _app(**kw):
    return make_app(snapshots=[shipped(n) for n in EXAMPLES], **kw)


@pytest.mark.parametrize("size", SIZES)
def test_launch(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size)


def test_launch_with_invalid_values(snap_compare):
    async def before(pilot):
        pane = pilot.app.query_one("#launch-pane")
        pane.set_value("ctx", "0")
        pane.set_value("size", "custom")
        pane.set_value("d_model", "96")
        pane.set_value("n_heads", "5")
        await pilot.pause()
    assert snap_compare(_app(), terminal_size=(120, 34), run_before=before)


@pytest.mark.parametrize("size", SIZES)
def test_live_finished_run(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, press=["5", "enter"])


def test_live_ascii(snap_compare):
    assert snap_compare(_app(ascii_only=True), terminal_size=(80, 24), press=["5", "enter"])


def test_kernels_on_nsys_fixture(snap_compare):
    async def before(pilot):
        app = pilot.app
        r = fixture_profile_record()
        app.session.add(r)
        app.session.show(r)
        app.show_current()
        app.refresh_runs()
        await pilot.press("3")
        await pilot.pause()   # the tab shown and its table filled before the cursor moves (a loaded machine)
        app.query_one("#kernel-table").move_cursor(column=0)
        await pilot.press("s")
        await pilot.pause()
    assert snap_compare(_app(), terminal_size=(120, 34), run_before=before)


def test_nvtx_with_range_kernels(snap_compare):
    async def before(pilot):
        await pilot.press("5", "down", "down", "down", "enter", "4")
        t = pilot.app.query_one("#nvtx-table")
        # The ranges are drawn once the opened run reaches the pane: later than one pause on a loaded machine
        # (the clean-clone CI of 74c00c9 read an empty table here).
        await wait_for(pilot, lambda: "forward" in [r["range"] for r in t.shown], timeout=30)
        t.move_cursor(row=[r["range"] for r in t.shown].index("forward"))
        await pilot.pause()
    assert snap_compare(_app(), terminal_size=(120, 34), run_before=before)


@pytest.mark.parametrize("size", SIZES)
def test_runs_with_marks(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, press=["5", "space", "down", "space"])


@pytest.mark.parametrize("size", SIZES)
def test_compare(snap_compare, size):
    assert snap_compare(_app(), terminal_size=size, press=["5", "space", "down", "space", "c"])


def test_help(snap_compare):
    assert snap_compare(_app(), terminal_size=(120, 34), press=["5", "question_mark"])


def test_quit_confirmation_is_a_dialog(snap_compare):
    from perfconsole.tui.screens.dialogs import ConfirmScreen

    async def before(pilot):
        pilot.app.push_screen(ConfirmScreen("tiny ctx32 b2 fp32 train is running. Quit and end it? (y/n)"))
        await pilot.pause()
    assert snap_compare(_app(), terminal_size=(80, 24), run_before=before)


@pytest.mark.parametrize("size", SIZES)
def test_grid_sweep(snap_compare, size):
    app = make_app(snapshots=[GRIDS / "sweep_train_fp32_bf16.json"])
    assert snap_compare(app, terminal_size=size, press=["7"])


@pytest.mark.parametrize("size", SIZES)
def test_grid_attention(snap_compare, size):
    app = make_app(snapshots=[GRIDS / "attention_grid.json"])
    assert snap_compare(app, terminal_size=size, press=["7"])


def test_grid_attention_memory_ascii(snap_compare):
    app = make_app(snapshots=[GRIDS / "attention_grid.json"], ascii_only=True)
    assert snap_compare(app, terminal_size=(80, 24), press=["7", "t"])


def test_runs_with_grids(snap_compare):
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), shipped("tiny-cpu-sweep.json"),
                              GRIDS / "sweep_train_fp32_bf16.json", GRIDS / "attention_grid.json"])
    assert snap_compare(app, terminal_size=(120, 34), press=["5", "down", "down"])

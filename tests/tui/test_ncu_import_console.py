"""Nsight Compute's details page (tests/fixtures/ncu/details.csv, a real export of an H100) imported in the console
with `i` from Runs, as a user does: the dialog says it takes ncu's pages and torch traces, Kernels lists the kernels
with their replay durations, Enter opens why one takes its time, NVTX says why it has no ranges, Runs lists the
import without steps it never had, and Live shows no spec the file never held."""
from __future__ import annotations

from console_helpers import ROOT, make_app, plain, screen_lines, wait_for

from perfconsole.tui.screens.dialogs import OpenScreen
from perfconsole.tui.screens.kernel_why import KernelWhyScreen
from perfconsole.tui.widgets.sortable_table import SortableTable

DETAILS = ROOT / "tests" / "fixtures" / "ncu" / "details.csv"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"


async def _import(app, pilot) -> None:
    await pilot.press("5", "i")
    await pilot.pause()
    assert isinstance(app.screen, OpenScreen)
    await pilot.press(*str(DETAILS), "enter")
    await wait_for(pilot, lambda: app.session.current is not None and app.session.current.status == "imported", timeout=60)
    await pilot.pause()


async def test_the_import_dialog_names_ncu_pages_and_torch_traces():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "i")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        shown = " ".join(" ".join(line.strip(" │") for line in screen_lines(app)).split())
        for words in ("nsys stats CSVs or a stats log, an .nsys-rep,", "an nvprof log, a torch.profiler trace "
                      "(torch_trace.json), or", "Nsight Compute's CSV pages (--csv --page details|raw) or .ncu-rep"):
            assert words in shown, words


async def test_kernels_lists_the_ncu_kernels_with_replay_times_and_enter_opens_the_why():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _import(app, pilot)
        table = app.query_one("#kernel-table", SortableTable)
        assert [r["name"] for r in table.shown][:1] == [GEMM] and len(table.shown) == 5
        assert table.cols[0].label == "replay ms"
        title = plain(app.query_one("#kernels-title").content)
        assert "import details.csv: 5 kernels (import, ncu replay time)" in title
        text = "\n".join(screen_lines(app))
        assert "0.179" in text and GEMM in text
        table.focus()
        table.move_cursor(row=0)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, KernelWhyScreen)
        why = "\n".join(screen_lines(app))
        assert "0.179 ms of ncu replay (42.2 % of all the replay time)" in why
        assert "compute    90.0 %" in why and "under ncu's replay" in why


async def test_nvtx_says_ncu_pages_hold_no_ranges():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _import(app, pilot)
        assert "Nsight Compute's pages hold no NVTX ranges" in plain(app.query_one("#nvtx-title").content)


async def test_runs_lists_the_import_without_steps():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _import(app, pilot)
        row = app.query_one("#runs-table").get_row_at(0)
        assert [plain(c).strip() for c in row[2:5]] == ["import details.csv", "imported", "-"]


async def test_live_shows_no_spec_for_an_import():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _import(app, pilot)
        header = plain(app.query_one("#live-header").content)
        assert header.strip() == "import details.csv · an imported profile: no run spec, no timed steps"
        status = plain(app.query_one("#live-status").content)
        assert "measured steps" not in status and "Kernels (3)" in status

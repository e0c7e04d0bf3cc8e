"""A scaling curve in the console: listed in Runs, opened into Grids as its table of process counts and the bars
under it, on a real CPU curve of the tiny model (1, 2 and 4 gloo processes, tests/fixtures/scale/)."""
from __future__ import annotations

from textual.widgets import Static

from perfconsole.core import store
from perfconsole.core.reports.scale import rows
from tests.tui.console_helpers import ROOT, make_app, plain

CURVE = ROOT / "tests" / "fixtures" / "scale" / "scale_tiny_cpu.json"


async def test_a_saved_curve_opens_from_runs_into_grids_with_its_counts_and_bars():
    app = make_app(snapshots=[CURVE])
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        table = app.query_one("#runs-table")
        assert [plain(c).strip() for c in table.get_row_at(0)][2:5] == [
            "scale tiny ctx32 b4 fp32 ddp x1,2,4 weak", "ok", "3/3 cells"]
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids"
        head = plain(app.query_one("#grids-head", Static).content)
        body = plain(app.query_one("#grids-body", Static).content)
        assert "scale tiny ctx32 b4 fp32 ddp x1,2,4 weak" in head and "3/3 cells finished" in head
        assert "ddp over 1,2,4" in head
        lines = body.splitlines()
        assert lines[0].split()[:3] == ["processes", "batch/rank", "status"] and "weak scaling" in lines[0]
        expected = rows(store.load(CURVE))
        for row in expected:
            line = next(x for x in lines if x.split()[:3] == [str(row.processes), "4", "ok"])
            assert f"{row.median_ms:,.2f}" in line and f"{row.efficiency:.1%}" in line
        four = next(x for x in lines if x.startswith("4 processes"))
        assert f"exposed {expected[2].exposed_comm_ms:,.1f} ms" in four and "█" in four
        assert any(x.startswith("1 process ") and "one process, no communication" in x for x in lines)
        await pilot.press("c")   # no chart for a curve: said, not drawn
        await pilot.pause()
        assert not app.query_one("#grids-pane").chart

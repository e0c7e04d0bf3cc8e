"""How the panes use the terminal: the Live chart grows with it, and columns keep what tells runs apart."""
from __future__ import annotations

from console_helpers import make_app, shipped

from perfconsole.core import store


async def _show(app, pilot, path) -> None:
    record = store.load(path)
    app.runs.append(record)
    app.current = record
    app.show_current()
    await pilot.press("2")
    await pilot.pause()


async def test_the_live_chart_grows_with_the_terminal():
    heights = {}
    for size in ((80, 24), (120, 40)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await _show(app, pilot, shipped("tiny-cpu-train-fp32.json"))
            heights[size] = app.query_one("#chart").size.height
            chart_lines = app.query_one("#chart").render().plain.splitlines()
            assert len(chart_lines) == heights[size]               # it draws in all of them
    assert heights[(80, 24)] >= 9
    assert heights[(120, 40)] >= heights[(80, 24)] + 6

"""--ascii draws with ASCII only: scrollbars, the footer, tabs, tables and dropdowns included."""
from __future__ import annotations

import html
import re

from console_helpers import fixture_profile_record, make_app, screen_lines


def _screen_text(app) -> str:
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg))).replace("\xa0", " ")


async def test_every_character_on_a_scrolling_pane_is_ascii():
    app = make_app(ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        record = fixture_profile_record()
        app.session.add(record)
        app.session.show(record)
        app.show_current()
        await pilot.press("3")                     # 238 kernels: a vertical scrollbar
        await pilot.pause()
        text = _screen_text(app)
        assert "316.903" in text and "all" in text
        odd = sorted({c for c in text if ord(c) > 126})
        assert odd == [], odd


async def test_unicode_mode_keeps_its_scrollbar_afterwards():
    from textual.scrollbar import ScrollBar, ScrollBarRender

    app = make_app(ascii_only=True)
    async with app.run_test(size=(80, 24)):
        assert ScrollBar.renderer is not ScrollBarRender
    assert ScrollBar.renderer is ScrollBarRender


async def test_a_checkbox_reads_on_or_off_without_colour():
    for ascii_only, on, off in ((True, "[x]", "[ ]"), (False, "[✓]", "[ ]")):
        app = make_app(ascii_only=ascii_only)
        async with app.run_test(size=(80, 24)) as pilot:
            app.query_one("#f-compile").value = True
            await pilot.pause()
            rows = {line.split()[0]: line.split(None, 1)[1] for line in screen_lines(app)
                    if line.split()[:1] in (["compile"], ["tf32"])}
            assert rows["compile"].startswith(on) and rows["tf32"].startswith(off), rows


async def test_ascii_mode_draws_each_phase_with_its_own_character():
    from console_helpers import shipped

    from perfconsole.core import store

    app = make_app(ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        record = store.load(shipped("tiny-cpu-train-fp32.json"))     # a train run: forward, backward, optimizer
        app.session.add(record)
        app.session.show(record)
        app.show_current()
        await pilot.press("2")
        await pilot.pause()
        chart = app.query_one("#chart").render().plain.splitlines()
        legend = chart[-1].split()
        assert legend[:6] == ["#", "fwd", "=", "bwd", "+", "opt"], legend     # was "#" for all three
        bars = "".join(chart[:-2])
        assert {"#", "=", "+"} <= set(bars), chart

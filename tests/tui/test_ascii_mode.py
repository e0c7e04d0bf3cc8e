"""--ascii draws with ASCII only: scrollbars, the footer, tabs, tables and dropdowns included."""
from __future__ import annotations

import html
import re

from console_helpers import fixture_profile_record, make_app


def _screen_text(app) -> str:
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg))).replace("\xa0", " ")


async def test_every_character_on_a_scrolling_pane_is_ascii():
    app = make_app(ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        record = fixture_profile_record()
        app.runs.append(record)
        app.current = record
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

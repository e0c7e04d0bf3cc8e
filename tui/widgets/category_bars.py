"""Category shares of kernel time as horizontal bars."""
from __future__ import annotations

from rich.table import Table
from textual.widgets import Static

from perfconsole.core.profiling.analyses import CategoryShare
from perfconsole.tui.glyphs import UNICODE, Glyphs, bar

BAR_W = 20


class CategoryBars(Static):
    DEFAULT_CSS = "CategoryBars { height: auto; }"

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs

    def show(self, shares: list[CategoryShare]) -> None:
        if not shares:
            self.update("no kernel table")
            return
        t = Table.grid(padding=(0, 1))
        t.add_column(width=13)
        t.add_column(style="cyan")
        t.add_column(justify="right")
        for s in shares:
            t.add_row(s.category, bar(s.share, BAR_W, self.glyphs), f"{s.share:6.1%}")
        self.update(t)

"""The console's tables: Home and End go to the first and last row.

Textual's DataTable gives Home/End to the first and last column (scrolling sideways) and the rows to
ctrl+Home/ctrl+End, which many terminals and tmux do not pass on. In a list of runs, steps or kernels
a user pressing End wants the last row.

Textual's `clear()` keeps each column as wide as its widest cell ever was, so a table refilled with
shorter cells (names cut for a narrower terminal) stayed too wide; here the columns shrink to fit
what is put back.
"""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable


class ConsoleTable(DataTable):
    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def clear(self, columns: bool = False) -> ConsoleTable:
        super().clear(columns)
        for column in self.columns.values():
            if column.auto_width:
                column.content_width = column.label.cell_len
        return self


def cut_middle(text: str, width: int) -> str:
    """Text cut to `width` in the middle, keeping its start and its end: names that share a start
    ("aten::_log_softmax", "stage.process:model.layers.11", a run's "#2") differ at the end."""
    if len(text) <= width:
        return text
    head = (width - 2 + 1) // 2
    return text[:head] + ".." + text[len(text) - (width - 2 - head):]

"""The console's tables: Home and End go to the first and last row.

Textual's DataTable gives Home/End to the first and last column (scrolling sideways) and the rows to
ctrl+Home/ctrl+End, which many terminals and tmux do not pass on. In a list of runs, steps or kernels
a user pressing End wants the last row.
"""
from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable


class ConsoleTable(DataTable):
    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]


def cut_middle(text: str, width: int) -> str:
    """Text cut to `width` in the middle, keeping its start and its end: names that share a start
    ("aten::_log_softmax", "stage.process:model.layers.11", a run's "#2") differ at the end."""
    if len(text) <= width:
        return text
    head = (width - 2 + 1) // 2
    return text[:head] + ".." + text[len(text) - (width - 2 - head):]

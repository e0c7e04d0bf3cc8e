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

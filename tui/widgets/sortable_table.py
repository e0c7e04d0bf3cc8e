"""A DataTable over a list of row dicts: sort by any column (numbers as numbers, both directions) and filter.

The rows stay plain dicts from core's tables; the widget re-fills itself after a sort or a filter, so
sorting is always by the underlying value, never by its formatted text.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding

from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.console_table import ConsoleTable, cut_middle


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    fmt: Callable[[Any], str] = str
    width: int | None = None
    numeric: bool = False
    fill: bool = False    # takes the width the other columns leave; longer text is cut in the middle


class SortableTable(ConsoleTable):
    BINDINGS = [
        Binding("s", "sort_column", "Sort", id="table.sort"),
    ]

    def __init__(self, columns: list[Column], glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=True, **kw)
        self.cols = columns
        self.glyphs = glyphs
        self.rows_all: list[dict[str, Any]] = []
        self.shown: list[dict[str, Any]] = []
        self.sort_key: str | None = None
        self.sort_reverse = False
        self.predicate: Callable[[dict[str, Any]], bool] | None = None

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self, cells: list[list[Text | str]] | None = None) -> None:
        """The columns, each as wide as its widest cell (or its own width): set here, not left to the
        DataTable, which measures new rows only when it next idles; a filter typed into a field gives it
        no idle moment, so its rows were drawn cut to the header's width ("5,560." for 5,560.7)."""
        self.clear(columns=True)
        for i, c in enumerate(self.cols):
            arrow = ""
            if c.key == self.sort_key:
                arrow = " " + (self.glyphs.down if self.sort_reverse else self.glyphs.up)
            label = c.label + arrow
            width = c.width or max([cell_len(label), *(cell_len(str(row[i])) for row in cells or ())])
            self.add_column(label, key=c.key, width=width)

    def set_rows(self, rows: list[dict[str, Any]]) -> None:
        self.rows_all = list(rows)
        self.refill()

    def set_filter(self, predicate: Callable[[dict[str, Any]], bool] | None) -> None:
        self.predicate = predicate
        self.refill()

    def sort_by(self, key: str, reverse: bool) -> None:
        self.sort_key, self.sort_reverse = key, reverse
        self.refill()

    def action_sort_column(self) -> None:
        """Sort by the column under the cursor; again on the same column reverses the order."""
        if not self.cols:
            return
        key = self.cols[min(self.cursor_column, len(self.cols) - 1)].key
        col = next(c for c in self.cols if c.key == key)
        reverse = (not self.sort_reverse) if key == self.sort_key else col.numeric  # numbers: largest first
        self.sort_by(key, reverse)

    def refill(self) -> None:
        rows = [r for r in self.rows_all if self.predicate is None or self.predicate(r)]
        if self.sort_key is not None:
            key = self.sort_key
            col = next((c for c in self.cols if c.key == key), None)
            if col is not None and col.numeric:
                present = [r for r in rows if isinstance(r.get(key), (int, float))]
                missing = [r for r in rows if not isinstance(r.get(key), (int, float))]
                present.sort(key=lambda r: r[key], reverse=self.sort_reverse)
                rows = present + missing  # rows without a value stay last either way
            else:
                rows.sort(key=lambda r: str(r.get(key, "")).lower(), reverse=self.sort_reverse)
        self.shown = rows
        cursor = self.cursor_coordinate
        cells = [[self._cell(c, r.get(c.key)) for c in self.cols] for r in rows]
        fill = next((i for i, c in enumerate(self.cols) if c.fill), None)
        if fill is not None:
            room = self._fill_width(cells, fill)
            for row in cells:
                row[fill] = cut_middle(str(row[fill]), room)
        self._add_columns(cells)
        for row in cells:
            self.add_row(*row)
        if rows:
            self.cursor_coordinate = cursor if cursor.row < len(rows) else cursor._replace(row=0)

    def _fill_width(self, cells: list[list[Text | str]], fill: int) -> int:
        """What the fill column may take so that no column scrolls out of view (at least 16)."""
        width = (self.size.width or self.app.size.width) - 2                  # the vertical scrollbar
        used = 0
        for i, c in enumerate(self.cols):
            if i != fill:
                head = len(c.label) + (2 if c.key == self.sort_key else 0)   # the sorted column's arrow
                used += 2 + (c.width or max([head] + [len(str(row[i])) for row in cells]))
        return max(16, width - used - 2)

    def on_resize(self) -> None:
        if self.rows_all and any(c.fill for c in self.cols):
            self.refill()

    def _cell(self, col: Column, value: Any) -> Text | str:
        text = "-" if value is None else col.fmt(value)
        return Text(text, justify="right") if col.numeric else text

    def current_row(self) -> dict[str, Any] | None:
        if not self.shown or self.cursor_row >= len(self.shown):
            return None
        return self.shown[self.cursor_row]

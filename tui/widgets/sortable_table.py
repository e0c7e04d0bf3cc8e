"""A DataTable over a DataFrame: sort by any column (numbers as numbers, both directions), filter, and
build only the rows in view.

The table's rows stay core's DataFrame; a sort or a filter makes an array of row positions into it,
never a copy of the rows. The DataTable holds no rows of its own (table_rows.VirtualRows): the row a
line of the screen shows is formatted when it is drawn, a block of rows at a time, so a million-row
kernel table scrolls, sorts and filters as a small one does. Sorting is always by the underlying
value, never by its formatted text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding

from perfconsole.core.profiling.lazy_imports import numpy as np, pandas as pd
from perfconsole.core.profiling.table import RowsView, contiguous, frame_of, pylist, rows_of
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.console_table import ConsoleTable, cut_middle
from perfconsole.tui.widgets.table_rows import VirtualRows

EXACT_WIDTHS = 5_000  # up to this many rows every cell is measured; past it, each column's extremes


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    fmt: Callable[[Any], str] = str
    width: int | None = None
    numeric: bool = False
    fill: bool = False    # takes the width the other columns leave; longer text is cut in the middle


@dataclass(frozen=True)
class FrameFilter:
    """A filter as a whole-frame test: `mask(frame)` -> one bool per row (a row predicate would build
    every row of a million-row table to test it)."""
    mask: Callable[[pd.DataFrame], Any]


Predicate = Callable[[dict[str, Any]], bool] | FrameFilter


class SortableTable(VirtualRows, ConsoleTable):
    BINDINGS = [
        Binding("s", "sort_column", "Sort", id="table.sort"),
    ]

    def __init__(self, columns: list[Column], glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=True, **kw)
        self.cols = columns
        self.glyphs = glyphs
        self._frame: pd.DataFrame | None = None  # none until the first rows: a console that shows no table imports no pandas
        self.positions: np.ndarray | tuple[()] = ()  # the shown rows, in their order
        self.sort_key: str | None = None
        self.sort_reverse = False
        self.predicate: Predicate | None = None
        self._room = 16
        self._orders: dict[tuple[str, bool], np.ndarray] = {}
        self._lower: dict[str, pd.Series] = {}
        self._lengths: dict[str, np.ndarray] = {}

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            self._frame = pd.DataFrame()
        return self._frame

    @frame.setter
    def frame(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    @property
    def rows_all(self) -> RowsView:
        return RowsView(self.frame, range(len(self.frame)))

    @property
    def shown(self) -> RowsView:
        return RowsView(self.frame, self.positions)

    def on_mount(self) -> None:
        self._add_columns(self._widths())

    def _add_columns(self, widths: list[int]) -> None:
        """The columns at the widths given: set here, not left to the DataTable, which measures new rows
        only when it next idles; a filter typed into a field gives it no idle moment, so its rows were
        drawn cut to the header's width ("5,560." for 5,560.7)."""
        self.clear(columns=True)
        for c, w in zip(self.cols, widths):
            self.add_column(self._label(c), key=c.key, width=w)

    def _label(self, c: Column) -> str:
        arrow = ""
        if c.key == self.sort_key:
            arrow = " " + (self.glyphs.down if self.sort_reverse else self.glyphs.up)
        return c.label + arrow

    def set_rows(self, rows: Sequence[dict[str, Any]] | pd.DataFrame) -> None:
        self.frame = contiguous(frame_of(rows).reset_index(drop=True))
        self._orders, self._lower, self._lengths = {}, {}, {}  # per table: sort orders, sort keys, text widths
        self.refill()

    def set_filter(self, predicate: Predicate | None) -> None:
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

    def _kept(self) -> np.ndarray:
        frame, pred = self.frame, self.predicate
        if pred is None:
            return np.arange(len(frame))
        if isinstance(pred, FrameFilter):
            mask = np.asarray(pred.mask(frame), dtype=bool) if len(frame) else np.zeros(0, dtype=bool)
        else:
            mask = np.fromiter((bool(pred(r)) for r in RowsView(frame, np.arange(len(frame)))), dtype=bool,
                               count=len(frame))
        return np.flatnonzero(mask)

    def _ordered(self, kept: np.ndarray) -> np.ndarray:
        key = self.sort_key
        if key is None or not len(kept) or key not in self.frame.columns:
            return kept  # unsorted, or every row lacks the key: as they were
        order = self._orders.get((key, self.sort_reverse))
        if order is None:
            order = self._orders[(key, self.sort_reverse)] = self._sort_all(key)
        if len(kept) == len(self.frame):
            return order
        # a stable sort of the kept rows is the whole table's order with the others left out
        keep = np.zeros(len(self.frame), dtype=bool)
        keep[kept] = True
        return order[keep[order]]

    def _sort_all(self, key: str) -> np.ndarray:
        """Every row's position, by `key` (numbers as numbers, missing last; text without case),
        equal values in table order: Python's stable sort, as the rows were sorted before."""
        col = next((c for c in self.cols if c.key == key), None)
        if col is not None and col.numeric:
            keys = pd.to_numeric(self.frame[key], errors="coerce")
            order = keys.sort_values(ascending=not self.sort_reverse, na_position="last", kind="stable").index
        else:
            keys = self._lowered(key)
            order = keys.sort_values(ascending=not self.sort_reverse, kind="stable").index
        return np.asarray(order, dtype=np.int64)

    def _lowered(self, key: str) -> pd.Series:
        if key not in self._lower:
            values = self.frame[key]
            text = values.astype("str") if values.dtype != "str" else values
            self._lower[key] = text.str.lower().fillna("none")  # a missing value sorts as str(None) did
        return self._lower[key]

    def _values(self, key: str, kept: np.ndarray) -> pd.Series:
        """The column for the kept rows, positioned 0..n-1 (no copy when every row is kept)."""
        col = self.frame[key]
        if len(kept) == len(self.frame):
            return col
        return col.take(kept).reset_index(drop=True)

    def refill(self) -> None:
        kept = self._kept()
        self.positions = self._ordered(kept)
        cursor = self.cursor_coordinate
        self._add_columns(self._widths(kept))
        self.show_rows(len(self.positions))
        if len(self.positions):
            self.cursor_coordinate = cursor if cursor.row < len(self.positions) else cursor._replace(row=0)

    def _widths(self, kept: np.ndarray | tuple[()] | None = None) -> list[int]:
        """Each column as wide as its widest cell (or its own width); the fill column takes what the
        others leave, so that no column scrolls out of view (at least 16)."""
        kept = () if kept is None else kept
        widest = [self._widest(c, kept) for c in self.cols]
        fill = next((i for i, c in enumerate(self.cols) if c.fill), None)
        if fill is not None:
            width = (self.size.width or self.app.size.width) - 2                  # the vertical scrollbar
            used = sum(2 + (c.width or max(len(c.label) + (2 if c.key == self.sort_key else 0), widest[i]))
                       for i, c in enumerate(self.cols) if i != fill)
            self._room = max(16, width - used - 2)
            widest[fill] = min(widest[fill], self._room)
        return [c.width or max(cell_len(self._label(c)), w) for c, w in zip(self.cols, widest)]

    def _widest(self, c: Column, kept: np.ndarray | tuple[()]) -> int:
        """The widest cell of the kept rows (their order does not matter)."""
        if c.width is not None or not len(kept):
            return 0
        if c.key not in self.frame.columns:
            return 1  # "-"
        values = self._values(c.key, kept)
        if len(kept) <= EXACT_WIDTHS:
            return max(cell_len(str(self._cell(c, v))) for v in pylist(values))
        if c.numeric:  # the widest number is the largest or the smallest (a sign), or "-" for none
            numbers = pd.to_numeric(values, errors="coerce")
            ends = [v for v in (numbers.min(), numbers.max()) if pd.notna(v)]
            texts = [c.fmt(v.item() if hasattr(v, "item") else v) for v in ends] + (["-"] if numbers.isna().any() else [])
            return max(map(cell_len, texts), default=1)
        if c.key not in self._lengths:
            text = self.frame[c.key]
            text = text.astype("str") if text.dtype != "str" else text
            self._lengths[c.key] = text.str.len().fillna(1).to_numpy(dtype=np.int64)
        return int(self._lengths[c.key][kept].max())

    def build_rows(self, start: int, stop: int) -> list[list[Text | str]]:
        """The cells of shown rows start..stop, formatted (VirtualRows asks for them as they come into view)."""
        fill = next((i for i, c in enumerate(self.cols) if c.fill), None)
        part = self.frame.take(self.positions[start:stop])
        rows = rows_of(part)
        cells = [[self._cell(c, r.get(c.key)) for c in self.cols] for r in rows]
        if fill is not None:
            for row in cells:
                row[fill] = cut_middle(str(row[fill]), self._room)
        return cells

    def on_resize(self) -> None:
        if self._frame is not None and len(self._frame) and any(c.fill for c in self.cols):
            self.refill()

    def _cell(self, col: Column, value: Any) -> Text | str:
        text = "-" if value is None or (isinstance(value, float) and value != value) else col.fmt(value)
        return Text(text, justify="right") if col.numeric else text

    def current_row(self) -> dict[str, Any] | None:
        if not len(self.positions) or self.cursor_row >= len(self.positions):
            return None
        return rows_of(self.frame.take([self.positions[self.cursor_row]]))[0]

"""Rows a DataTable does not hold: the table asks for a row when it draws it.

Textual's DataTable keeps every row it shows (a key, a Row, a dict of cells, a line offset): filling it
with a million kernels took minutes and gigabytes. `VirtualRows` hands the DataTable stand-ins for those
structures that answer from a row count, all rows one line high, and a `build_rows(start, stop)`
callback that formats a block of rows when one of them comes into view. Everything else (cursor, keys,
mouse, scrolling, styles, the CellHighlighted message) is the DataTable's own.

The stand-ins follow the DataTable of textual 8 (`rows`, `_data`, `_row_locations`, `_y_offsets`,
`ordered_rows`, the cell and row regions); tests/tui/test_big_tables.py drives a million-row table
through it, so a textual whose DataTable keeps its rows otherwise fails there.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

from rich.text import Text
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets.data_table import Row, RowKey
from textual._two_way_dict import TwoWayDict

BLOCK = 64        # rows formatted at a time
KEPT_BLOCKS = 16  # blocks kept formatted (a few screens up and down)


def _index(key: Any, n: int) -> int | None:
    value = key.value if isinstance(key, RowKey) else key
    if not isinstance(value, str) or not value.isdigit():
        return None
    i = int(value)
    return i if i < n else None


class _Rows(Mapping):
    """`DataTable.rows`: every row a line high, keyed by its position."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[RowKey]:
        return (RowKey(str(i)) for i in range(self.n))

    def __getitem__(self, key: Any) -> Row:
        if _index(key, self.n) is None:
            raise KeyError(key)
        return Row(key if isinstance(key, RowKey) else RowKey(key), 1)

    def __contains__(self, key: object) -> bool:
        return _index(key, self.n) is not None

    def clear(self) -> None:
        self.n = 0


class _Locations:
    """`DataTable._row_locations` (a two-way key <-> position map): the key is the position."""

    def __init__(self, n: int) -> None:
        self.n = n

    def get(self, key: Any, default: Any = None) -> int | None:
        i = _index(key, self.n)
        return default if i is None else i

    def get_key(self, index: int) -> RowKey | None:
        return RowKey(str(index)) if 0 <= index < self.n else None

    def __contains__(self, key: object) -> bool:
        return _index(key, self.n) is not None

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[RowKey]:
        return (RowKey(str(i)) for i in range(self.n))


class _Cells(Mapping):
    """`DataTable._data`: row key -> {column key: cell}, formatted a block at a time and kept a while."""

    def __init__(self, table: VirtualRows, n: int) -> None:
        self.table, self.n = table, n
        self.blocks: OrderedDict[int, list[list[Text | str]]] = OrderedDict()

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[RowKey]:
        return (RowKey(str(i)) for i in range(self.n))

    def __getitem__(self, key: Any) -> dict[Any, Text | str]:
        i = _index(key, self.n)
        if i is None:
            raise KeyError(key)
        block = i // BLOCK
        cells = self.blocks.get(block)
        if cells is None:
            cells = self.table.build_rows(block * BLOCK, min((block + 1) * BLOCK, self.n))
            self.blocks[block] = cells
            while len(self.blocks) > KEPT_BLOCKS:
                self.blocks.popitem(last=False)
        else:
            self.blocks.move_to_end(block)
        columns = self.table.ordered_columns
        return {col.key: cell for col, cell in zip(columns, cells[i - block * BLOCK])}

    def clear(self) -> None:
        self.n = 0
        self.blocks.clear()


class _Lines:
    """`DataTable._y_offsets`: line y of the body is row y, line 0 of it."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, y: int) -> tuple[RowKey, int]:
        if not 0 <= y < self.n:
            raise IndexError(y)
        return RowKey(str(y)), 0

    def clear(self) -> None:
        pass


class _OrderedRows:
    """`DataTable.ordered_rows` over a range of positions, built as they are read."""

    def __init__(self, positions: range) -> None:
        self.positions = positions

    def __len__(self) -> int:
        return len(self.positions)

    def __iter__(self) -> Iterator[Row]:
        return (Row(RowKey(str(i)), 1) for i in self.positions)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return _OrderedRows(self.positions[i])
        return Row(RowKey(str(self.positions[i])), 1)


class VirtualRows:
    """Mixed in before a DataTable: `show_rows(n)` shows n rows that `build_rows` formats on demand."""

    def build_rows(self, start: int, stop: int) -> list[list[Text | str]]:
        raise NotImplementedError

    def show_rows(self, n: int) -> None:
        """n rows, after the columns are in place (a cleared table)."""
        self.rows = _Rows(n)
        self._row_locations = _Locations(n)
        self._data = _Cells(self, n)
        self._new_rows = set()
        self._update_count += 1
        self._clear_caches()
        if self.is_mounted:
            self._update_dimensions([])  # the scrollable height: n lines and the header
        else:
            self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if n and self.columns and self.show_cursor and self.cursor_type != "none":
            self._highlight_cursor()  # as the first added row did: the cell under the cursor is news
        self.refresh()

    def clear(self, columns: bool = False) -> Any:
        self.rows, self._data, self._row_locations = {}, {}, TwoWayDict({})
        return super().clear(columns)

    @property
    def _y_offsets(self) -> _Lines:
        return _Lines(self.row_count)

    @property
    def ordered_rows(self) -> _OrderedRows:
        return _OrderedRows(range(self.row_count))

    def _get_cell_region(self, coordinate: Coordinate) -> Region:
        if not self.is_valid_coordinate(coordinate):
            return Region(0, 0, 0, 0)
        row, column = coordinate
        x = sum(c.get_render_width(self) for c in self.ordered_columns[:column]) + self._row_label_column_width
        width = self.ordered_columns[column].get_render_width(self)
        return Region(x, row + (self.header_height if self.show_header else 0), width, 1)

    def _get_row_region(self, row_index: int) -> Region:
        if not self.is_valid_row_index(row_index):
            return Region(0, 0, 0, 0)
        width = sum(c.get_render_width(self) for c in self.columns.values()) + self._row_label_column_width
        y = row_index + (self.header_height if self.show_header else 0)
        return Region(0, y, max(self.size.width, width), 1)

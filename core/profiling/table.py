"""`ProfileTable`: a profile table as a pandas DataFrame, read as row dicts only where rows are wanted.

Every reader (nsys CSVs and logs, nvprof, torch traces) ends in one DataFrame per report with the
normalised columns (columns.py). Sorting, filtering, categories and phase shares work on the frame;
rows (`dict`s of plain Python values) are built only to draw a page of a table or to write JSON, a
chunk at a time. `ProfileTable` is also a read-only `Sequence` of those row dicts, so code that reads
a few rows (`table[0]`, `table[:20]`, `len(table)`) sees the shape it always saw, and a record's
tables compare equal to the lists of rows a snapshot holds.

A table that came from JSON (a saved snapshot) is a plain list of rows; `frame_of` takes either.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

from perfconsole.core.profiling.lazy_imports import pandas as pd

Row = dict[str, Any]
CHUNK = 16_384  # rows built at a time when iterating or writing


class ProfileTable(Sequence[Row]):
    """Rows of one report, held as a DataFrame (`.frame`, positional: row i is `frame.iloc[i]`)."""

    __slots__ = ("frame",)

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def __len__(self) -> int:
        return len(self.frame)

    @overload
    def __getitem__(self, i: int) -> Row: ...
    @overload
    def __getitem__(self, i: slice) -> list[Row]: ...

    def __getitem__(self, i: int | slice) -> Row | list[Row]:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1:
                return rows_of(self.frame, start, stop)
            return [self[j] for j in range(start, stop, step)]
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"row {i} of a {n}-row table")
        return rows_of(self.frame, j, j + 1)[0]

    def __iter__(self) -> Iterator[Row]:
        for start in range(0, len(self), CHUNK):
            yield from rows_of(self.frame, start, start + CHUNK)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ProfileTable, list, tuple)):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __add__(self, other: Sequence[Row]) -> list[Row]:
        return list(self) + list(other)

    def __radd__(self, other: Sequence[Row]) -> list[Row]:
        return list(other) + list(self)

    def __repr__(self) -> str:
        return f"ProfileTable({len(self)} rows: {', '.join(map(str, self.frame.columns))})"

    @property
    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    def rows(self) -> list[Row]:
        return rows_of(self.frame)

    def to_dict(self) -> list[Row]:
        """What JSON holds for a table: its rows (the snapshot writer calls this for objects it does not know)."""
        return self.rows()


def frame_of(table: Sequence[Row] | pd.DataFrame | None) -> pd.DataFrame:
    """The DataFrame of a table: a ProfileTable's own, or one built from a list of row dicts."""
    if table is None:
        return pd.DataFrame()
    if isinstance(table, ProfileTable):
        return table.frame
    if isinstance(table, pd.DataFrame):
        return table
    return pd.DataFrame.from_records(list(table)) if len(table) else pd.DataFrame()


class TableFrames:
    """A profile's tables, each one's frame built on first use and kept with what was derived from it (its
    categories, shares): a view reads them without building them again. A table replaced in the mapping (ncu's
    tables merged into a run's profile) is built afresh; the rows are held, so their identity stays theirs."""

    __slots__ = ("tables", "_held")

    def __init__(self, tables: Mapping[str, Sequence[Row]]) -> None:
        self.tables = tables
        self._held: dict[str, dict[str, Any]] = {}

    def has(self, name: str) -> bool:
        """The table is there and holds rows (as `tables.get(name)` is true)."""
        return bool(self.tables.get(name))

    def frame(self, name: str) -> pd.DataFrame | None:
        """The named table as a DataFrame; None when it is absent or empty."""
        held = self._entry(name)
        if held is None:
            return None
        if "frame" not in held:
            held["frame"] = frame_of(held["rows"])
        return held["frame"]

    def view(self, name: str, key: str, build: Callable[[pd.DataFrame], Any]) -> Any:
        """`build(frame)` of the named table, once for its rows; None without the table."""
        frame = self.frame(name)
        if frame is None:
            return None
        held = self._held[name]
        if key not in held:
            held[key] = build(frame)
        return held[key]

    def _entry(self, name: str) -> dict[str, Any] | None:
        rows = self.tables.get(name)
        if not rows:
            return None
        held = self._held.get(name)
        if held is None or held["rows"] is not rows:
            held = self._held[name] = {"rows": rows}
        return held


def frames_of(tables: Mapping[str, Sequence[Row]] | TableFrames) -> TableFrames:
    """The tables' frames: a TableFrames as it is (its frames already built stay), or one over a mapping."""
    return tables if isinstance(tables, TableFrames) else TableFrames(tables)


def contiguous(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with each arrow-backed column in one piece, numbers without a gap as numpy: a CSV read
    block by block leaves a column in hundreds of chunks, and taking rows from a chunked column (a sorted
    page of a table) joins the chunks every time."""
    out = {}
    for name in frame.columns:
        col = frame[name]
        arrow = getattr(col.array, "__arrow_array__", None)
        if arrow is None:
            out[name] = col
            continue
        data = arrow()
        if col.dtype.kind in "iufb" and not data.null_count:
            out[name] = pd.Series(data.to_numpy(), index=col.index)
        elif getattr(data, "num_chunks", 1) > 1:
            out[name] = pd.Series(data.combine_chunks(), dtype=col.dtype, index=col.index)
        else:
            out[name] = col
    return pd.DataFrame(out, copy=False) if out else frame


def as_table(table: Sequence[Row] | pd.DataFrame) -> ProfileTable:
    return table if isinstance(table, ProfileTable) else ProfileTable(frame_of(table))


def pylist(column: pd.Series) -> list[Any]:
    """A column's values as plain Python values (int, float, str, bool; None where missing)."""
    arrow = getattr(column.array, "__arrow_array__", None)
    if arrow is not None:
        return arrow().to_pylist()
    if column.dtype.kind in "iufb":
        return column.to_numpy().tolist()
    values = column.tolist()
    if column.hasnans:
        missing = column.isna().to_numpy()
        values = [None if m else v for v, m in zip(values, missing)]
    return values


def rows_of(frame: pd.DataFrame, start: int = 0, stop: int | None = None) -> list[Row]:
    """Rows start..stop of a frame as dicts in column order."""
    part = frame.iloc[start:stop]
    names = [str(c) for c in part.columns]
    columns = [pylist(part.iloc[:, j]) for j in range(len(names))]
    return [dict(zip(names, values)) for values in zip(*columns)] if names else [{} for _ in range(len(part))]


def column_lists(frame: pd.DataFrame, start: int, stop: int) -> tuple[list[str], list[list[Any]]]:
    part = frame.iloc[start:stop]
    return [str(c) for c in part.columns], [pylist(part.iloc[:, j]) for j in range(part.shape[1])]


def table_from_rows(rows: list[Row]) -> ProfileTable | list[Row]:
    """Rows built one by one (the row-wise reader, nvprof, torch traces) as a ProfileTable, when the
    frame gives back exactly these rows (same keys in the same order, same values and types); the list
    itself otherwise (rows with different keys, or a column mixing types a frame would coerce)."""
    if not rows:
        return ProfileTable(pd.DataFrame())
    table = ProfileTable(pd.DataFrame.from_records(rows))
    if table.rows() == rows and all(_same_types(a, b) for a, b in zip(table, rows)):
        return table
    objects = ProfileTable(pd.DataFrame({k: pd.Series([r.get(k) for r in rows], dtype=object) for k in rows[0]}))
    if objects.rows() == rows and all(_same_types(a, b) for a, b in zip(objects, rows)):
        return objects
    return rows


def _same_types(a: Row, b: Row) -> bool:
    return list(a) == list(b) and all(type(a[k]) is type(b[k]) for k in b)


class RowsView(Sequence[Row]):
    """Some rows of a frame, in a given order (positions into it), read as row dicts on demand: a
    sorted or filtered table that copies nothing but the positions."""

    __slots__ = ("frame", "positions")

    def __init__(self, frame: pd.DataFrame, positions: Any) -> None:
        self.frame, self.positions = frame, positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return rows_of(self.frame.take(self.positions[i]))
        return rows_of(self.frame.take([self.positions[i]]))[0]

    def __iter__(self) -> Iterator[Row]:
        for start in range(0, len(self), CHUNK):
            yield from rows_of(self.frame.take(self.positions[start:start + CHUNK]))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Sequence)) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

"""`json.dump(doc, out, indent=...)` for documents holding ProfileTables: the same text to the byte, with
each table's rows built and written a block at a time, a column at a time.

A million-row kernel table as row dicts fed to json's indenting encoder (pure Python) took most of
the 28 s of `perfconsole import --json`. Here the document is written by json with a marker where each
table goes; each table's block of rows is encoded a column at a time by json's C encoder (one call for
a column's values: numbers, booleans, null, or strings), and the rows are assembled from those texts
with one format string laid out as json lays out an object at that depth.
"""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any, TextIO

from perfconsole.core.profiling import table_arrow
from perfconsole.core.profiling.table import ProfileTable, column_lists

BLOCK = 10_000


def dump(doc: Any, out: TextIO, indent: int = 1) -> None:
    for part in iterdump(doc, indent):
        out.write(part)


def iterdump(doc: Any, indent: int = 1) -> Iterator[str]:
    tables: dict[str, ProfileTable] = {}
    tag = uuid.uuid4().hex
    marked = _mark(doc, tables, tag)
    text = json.dumps(marked, indent=indent)
    for key, table in tables.items():
        quoted = json.dumps(key)
        at = text.index(quoted)
        line_start = text.rfind("\n", 0, at) + 1
        depth = len(text) - len(text[line_start:].lstrip(" ")) - line_start
        yield text[:at]
        yield from _table(table, depth, indent)
        text = text[at + len(quoted):]
    yield text


def _mark(obj: Any, tables: dict[str, ProfileTable], tag: str) -> Any:
    if isinstance(obj, ProfileTable):
        key = f"@{tag}:{len(tables)}@"
        tables[key] = obj
        return key
    if isinstance(obj, dict):
        return {k: _mark(v, tables, tag) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_mark(v, tables, tag) for v in obj]
    return obj


def _table(table: ProfileTable, depth: int, indent: int) -> Iterator[str]:
    n = len(table)
    if n == 0:
        yield "[]"
        return
    item, field = " " * (depth + indent), " " * (depth + 2 * indent)
    yield "[\n" + item
    for start in range(0, n, BLOCK):
        stop = min(start + BLOCK, n)
        if start:
            yield ",\n" + item
        part = table.frame.iloc[start:stop]
        text = table_arrow.rows_text(part, item, field) if part.shape[1] else None
        if text is None:
            names, columns = column_lists(table.frame, start, stop)
            text = (",\n" + item).join(_rows(names, columns, item, field, stop - start))
        yield text
    yield "\n" + " " * depth + "]"


def _rows(names: list[str], columns: list[list[Any]], item: str, field: str, count: int) -> list[str]:
    if not names:
        return ["{}"] * count
    parts, encoded = [], []
    for name, values in zip(names, columns):
        texts, quoted = _encode(values)
        key = json.dumps(name).replace("{", "{{").replace("}", "}}")
        parts.append(f"{field}{key}: " + ('"{}"' if quoted else "{}"))
        encoded.append(texts)
    template = "{{\n" + ",\n".join(parts) + "\n" + item + "}}"
    return list(map(template.format, *encoded))


def _encode(values: list[Any]) -> tuple[list[str], bool]:
    """Each value as json.dumps writes it; (texts, True) gives strings without their quotes."""
    kinds = set(map(type, values))
    if kinds == {str}:
        # A raw quote inside an encoded string is always escaped, so `", "` only ever separates two strings.
        return json.dumps(values)[2:-2].split('", "'), True
    if kinds <= {int, float, bool, type(None)}:
        return json.dumps(values)[1:-1].split(", "), False  # no number, true, false or null holds ", "
    return [json.dumps(v) for v in values], False

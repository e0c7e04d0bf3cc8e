"""ProfileTable reads as the list of rows it replaced; table_json writes what json.dumps(indent=1) wrote."""
from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfconsole.core import store
from perfconsole.core.profiling import table as t
from perfconsole.core.profiling.table import ProfileTable, RowsView, table_from_rows
from perfconsole.core.profiling.table_json import dump
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.settings import RunSpec

ROWS = [{"time_pct": 98.1, "total_time_ns": 2**62 + 1, "instances": 3, "name": 'a "quoted", {braced} name'},
        {"time_pct": 0.0, "total_time_ns": 7, "instances": 1, "name": "é\\n"}]


def test_a_table_is_a_sequence_of_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    table = table_from_rows([dict(r) for r in ROWS])
    assert isinstance(table, ProfileTable)
    assert len(table) == 2 and table[0] == ROWS[0] and table[-1] == ROWS[1] and table[:] == ROWS
    assert table == ROWS and ROWS == table and table != ROWS[:1] and table + [] == ROWS and [] + table == ROWS
    assert type(table[0]["total_time_ns"]) is int and table[0]["total_time_ns"] == 2**62 + 1
    with pytest.raises(IndexError):
        table[2]
    monkeypatch.setattr(t, "CHUNK", 1)  # iteration goes a block at a time
    assert list(table) == ROWS and bool(table) and not ProfileTable(pd.DataFrame())


def test_rows_of_mixed_types_stay_as_they_were() -> None:
    mixed = [{"a": 1, "b": None}, {"a": 2, "b": 3}]
    assert table_from_rows(mixed) == mixed and type(table_from_rows(mixed)[1]["b"]) is int
    ragged = [{"a": 1}, {"b": 2}]
    assert table_from_rows(ragged) is ragged  # no frame holds rows with different keys: the list stays


def test_a_view_reads_rows_in_its_order() -> None:
    frame = pd.DataFrame(ROWS)
    view = RowsView(frame, [1, 0])
    assert len(view) == 2 and view[0] == ROWS[1] and view[:] == [ROWS[1], ROWS[0]] and list(view) == view[:]


def test_a_snapshot_holds_a_table_as_its_rows() -> None:
    table = table_from_rows([dict(r) for r in ROWS])
    record = RunRecord(RunSpec(), name="r", status="imported", profile=Profile("import", [], {"k": table}))
    back = store.loads(store.dumps(record))
    assert back.profile.tables == {"k": ROWS} and back.profile == record.profile


VALUES = st.one_of(st.integers(-2**63 + 1, 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False),
                   st.text(max_size=12), st.booleans(), st.none())


@settings(max_examples=200, deadline=None)
@given(columns=st.lists(st.text(max_size=6), min_size=0, max_size=5, unique=True),
       kinds=st.lists(st.sampled_from(["int", "float", "str", "bool", "any"]), min_size=5, max_size=5),
       n=st.integers(0, 6), data=st.data(), indent=st.sampled_from([1, 2, 4]))
def test_json_is_json_dumps_to_the_byte(columns, kinds, n, data, indent) -> None:
    strategy = {"int": st.integers(-2**63 + 1, 2**63 - 1), "str": st.text(max_size=12), "bool": st.booleans(),
                "float": st.floats(allow_nan=False, allow_infinity=False), "any": VALUES}
    rows = [{c: data.draw(strategy[k]) for c, k in zip(columns, kinds)} for _ in range(n)]
    table = ProfileTable(pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=object) for c in columns})
                         if columns else pd.DataFrame(index=range(n)))
    doc = {"tables": {"x": table, "y": []}, "list": [table, {"z": 1}], "warnings": ["w"]}
    plain = {"tables": {"x": rows, "y": []}, "list": [rows, {"z": 1}], "warnings": ["w"]}
    out = io.StringIO()
    dump(doc, out, indent=indent)
    assert out.getvalue() == json.dumps(plain, indent=indent)


FLOATS = st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from([0.0, -0.0, 27.0, 1e15, 1e15 + 0.5, 999999999999999.9, 1e-4, 9.99e-5, 1e-5, 1e16,
                                    2.0**53, 0.1, 98.1, 5e-324]))


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 8), data=st.data(),
       kinds=st.lists(st.sampled_from(["int", "float", "bool", "str", "text"]), min_size=1, max_size=5))
def test_typed_columns_are_json_dumps_to_the_byte(n, data, kinds) -> None:
    """Typed columns (numpy numbers, arrow-backed text) go through pyarrow (table_arrow): the same bytes."""
    strategy = {"int": st.integers(-2**63 + 1, 2**63 - 1), "float": FLOATS, "bool": st.booleans(),
                "str": st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=10),
                "text": st.text(max_size=10)}
    dtype = {"int": "int64", "float": "float64", "bool": "bool", "str": "str", "text": "str"}
    cols = {f"c{i}": [data.draw(strategy[k]) for _ in range(n)] for i, k in enumerate(kinds)}
    frame = pd.DataFrame({c: pd.Series(v, dtype=dtype[k]) for (c, v), k in zip(cols.items(), kinds)})
    rows = [{c: cols[c][i] for c in cols} for i in range(n)]
    out = io.StringIO()
    dump({"t": ProfileTable(frame)}, out, indent=1)
    assert out.getvalue() == json.dumps({"t": rows}, indent=1)

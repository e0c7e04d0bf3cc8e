"""categorize_column against categorize, name by name: on every real kernel name, and on names made of
the rules' own words, digits and separators, through each way it goes (the distinct names themselves;
digit skeletons with Python's re; skeletons made on arrow's buffers)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfconsole.core.profiling import categories as cf
from perfconsole.core.profiling.categories import categorize
from perfconsole.core.profiling.load import load_profile

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
WAYS = ["distinct", "python-skeleton", *(["arrow-skeleton", "arrow-rules"] if cf.HAS_ARROW else [])]


def fixture_names() -> list[str]:
    names = []
    for path in sorted(FIXTURES.glob("nsys*/**/*.csv")):
        tables, _ = load_profile(path)
        for rows in tables.values():
            names += [r.get("name") or r.get("operation") or r.get("range") for r in rows]
    return names


def categories(names: list[str], way: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    if way != "distinct":
        monkeypatch.setattr(cf, "SMALL", 0)  # skeletons from the first row on
    if way == "arrow-rules":
        monkeypatch.setattr(cf, "MANY", 0)  # the rules by pyarrow's RE2 from the first distinct skeleton on
    dtype = "str" if way.startswith("arrow") else object
    if way == "python-skeleton":
        monkeypatch.setattr(cf, "HAS_ARROW", False)
    return cf.categorize_column(pd.Series(names, dtype=dtype)).tolist()


@pytest.mark.parametrize("way", WAYS)
def test_every_fixture_name(way: str, monkeypatch: pytest.MonkeyPatch) -> None:
    names = fixture_names()
    assert len(names) > 600
    assert categories(names, way, monkeypatch) == [categorize(n) for n in names]


WORDS = ["c10d::", "10", "2", "Kernel2", "::Kernel", "void Kernel", "device_kernel", "gemm", "nccl", "AllReduce",
         "softmax", "flash", "triton_poi_fused_", "triton_red_", "mm", "_mm_", "bmm", "aten::", "aten::mm", "sum_",
         "elementwise", "memcpy", "[CUDA memset]", "<", ">", "(", ")", " ", "\t", "_", "0", "1", "7", "123", "x",
         "cutlass", "tensorop", "splitK", "layer_norm", "Adam", "_foreach_", "add_", "é", "١"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), max_size=9).map("".join), min_size=1, max_size=40))
def test_made_up_names(names: list[str]) -> None:
    want = [categorize(n) for n in names]
    with pytest.MonkeyPatch.context() as mp:
        for way in WAYS:
            assert categories(names, way, mp) == want, way


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="0123456789ab:_ ", max_size=12), min_size=1, max_size=30))
def test_arrow_skeletons_are_the_python_ones(names: list[str]) -> None:
    if not cf.HAS_ARROW:
        pytest.skip("no pyarrow")
    got = cf._chunk_skeleton(cf.pa.array(names, type=cf.pa.large_string())).to_pylist()
    assert got == [cf.skeleton(n) for n in names]


def test_the_rules_spell_these_digit_runs() -> None:
    """`c10d::` and `Kernel2?$`: a new digit in a rule joins KEPT_RUNS by itself (it is read from the rules)."""
    assert cf.KEPT_RUNS == {"10", "2"}
    assert cf.skeleton("c10d::x12y2z010 Kernel2 Kernel22") == "c10d::x00y2z000 Kernel2 Kernel00"

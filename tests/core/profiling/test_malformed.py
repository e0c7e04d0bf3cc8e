"""Malformed and truncated inputs: an error naming file and line, and every other report still loads."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfconsole.core.profiling.errors import ProfileError
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.stats_text import parse_stats_text
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "nsys"
KERN = FIXTURES / "moeresearch" / "AT_OFF_CG_OFF_cuda_gpu_kern_sum.csv"
API = FIXTURES / "moeresearch" / "AT_ON_CG_ON_cuda_api_sum.csv"


def test_bad_number_names_line_and_other_reports_load(tmp_path: Path) -> None:
    lines = KERN.read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace(",", ",12x", 1)  # line 6: Total Time no longer a number
    (tmp_path / "run_cuda_gpu_kern_sum.csv").write_text("".join(lines))
    shutil.copy(API, tmp_path / "run_cuda_api_sum.csv")
    tables, warnings = load_profile(tmp_path)
    assert list(tables) == ["cuda_api_sum"] and len(tables["cuda_api_sum"]) == 44
    assert len(warnings) == 1
    assert warnings[0].startswith(f"{tmp_path / 'run_cuda_gpu_kern_sum.csv'}:6: cuda_gpu_kern_sum: 'Total Time (ns)' is not a number")


def test_single_malformed_file_raises_with_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "x_cuda_gpu_kern_sum.csv"
    bad.write_text(KERN.read_text().splitlines()[0] + "\n1.0,2,3\n")
    with pytest.raises(ProfileError, match=r"x_cuda_gpu_kern_sum\.csv:2: cuda_gpu_kern_sum: expected 9 fields, got 3"):
        load_profile(bad)


def test_empty_and_unrelated_files(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ProfileError, match=r"empty\.csv:1: empty file"):
        load_profile(tmp_path / "empty.csv")
    (tmp_path / "notes.txt").write_text("hello, world\nnothing, here, at all\n")
    with pytest.raises(ProfileError, match=r"notes\.txt:1: no nsys stats table"):
        load_profile(tmp_path / "notes.txt")
    with pytest.raises(ProfileError, match="no such file"):
        load_profile(tmp_path / "missing.csv")


def test_header_only_csv_is_present_with_zero_rows(tmp_path: Path) -> None:
    p = tmp_path / "r_cuda_gpu_kern_sum.csv"
    p.write_text(KERN.read_text().splitlines()[0] + "\n")
    tables, warnings = load_profile(p)
    assert tables == {"cuda_gpu_kern_sum": []} and warnings == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=1, max_value=len(KERN.read_bytes()) - 1))
def test_truncated_file_never_passes_silently(cut: int) -> None:
    """A file cut anywhere either parses to a prefix of the real rows (cut at a line end), or the cut
    line is reported by number; it never yields a wrong row."""
    full = KERN.read_text()
    whole = parse_stats_text(full, "k.csv", "cuda_gpu_kern_sum").tables["cuda_gpu_kern_sum"]
    text = full[:cut]
    out = parse_stats_text(text, "k.csv", "cuda_gpu_kern_sum")
    if "cuda_gpu_kern_sum" in out.tables:
        rows = out.tables["cuda_gpu_kern_sum"]
        if rows and rows != whole[:len(rows)]:
            # a cut inside the last number or name can still form a valid row: it must be the last one
            assert rows[:-1] == whole[:len(rows) - 1]
            last_line = text.splitlines()[-1]
            assert not full.endswith(last_line + "\n") or cut == len(full)
    else:
        n_lines = text.count("\n") + 1
        assert out.warnings or n_lines == 1  # header itself cut: no table at all, nothing claimed
        for w in out.warnings:
            assert w.startswith(f"k.csv:{n_lines}: ")


@settings(max_examples=80, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400))
def test_arbitrary_text_never_crashes(text: str) -> None:
    out = parse_stats_text(text, "fuzz.txt")
    for w in out.warnings:
        assert w.startswith("fuzz.txt:")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["12", "1.5", "", "x", "-3", "1e5", "\"a,b\"", "9" * 25]), min_size=9, max_size=9))
def test_random_cells_give_row_or_located_error(cells: list[str]) -> None:
    header = KERN.read_text().splitlines()[0]
    out = parse_stats_text(header + "\n" + ",".join(cells) + "\n", "r.csv", "cuda_gpu_kern_sum")
    if "cuda_gpu_kern_sum" in out.tables:
        row = out.tables["cuda_gpu_kern_sum"][0]
        assert isinstance(row["total_time_ns"], int) and isinstance(row["instances"], int)
    else:
        assert len(out.warnings) == 1 and out.warnings[0].startswith("r.csv:2: ")


def test_missing_final_newline_warns_on_last_line(tmp_path: Path) -> None:
    text = KERN.read_text()
    p = tmp_path / "cut_cuda_gpu_kern_sum.csv"
    p.write_text(text[: text.rindex("\n") - 5])  # inside the last row's name
    tables, warnings = load_profile(p)
    assert len(tables["cuda_gpu_kern_sum"]) == 88
    assert warnings == [f"{p}:89: no newline at end of file; the last row may be truncated"]


def _with_cell(row_index: int, column: int, value: str) -> str:
    """The real kernel CSV with one numeric cell of one row replaced (numbers come before the name)."""
    lines = KERN.read_text().splitlines(keepends=True)
    cells = lines[row_index].split(",", 8)
    cells[column] = value
    lines[row_index] = ",".join(cells)
    return "".join(lines)


@pytest.mark.parametrize("column,header", [(1, "Total Time (ns)"), (2, "Instances"), (3, "Avg (ns)"),
                                           (5, "Min (ns)"), (7, "StdDev (ns)"), (0, "Time (%)")])
def test_400_digit_number_names_line_instead_of_overflowing(tmp_path: Path, column: int, header: str) -> None:
    """int('1'*400) works and float() makes it inf, so without a range check this ended in OverflowError
    (round(inf), or ns / 1e6 when printing); now it is a malformed value like any other."""
    bad = tmp_path / "run_cuda_gpu_kern_sum.csv"
    bad.write_text(_with_cell(3, column, "1" * 400))  # line 4
    shutil.copy(API, tmp_path / "run_cuda_api_sum.csv")
    tables, warnings = load_profile(tmp_path)
    assert list(tables) == ["cuda_api_sum"] and len(tables["cuda_api_sum"]) == 44
    assert warnings == [(f"{bad}:4: cuda_gpu_kern_sum: '{header}' is out of range (beyond int64 or infinite): "
                         f"'11111111111111111111...11111111 (400 chars)' (report cuda_gpu_kern_sum not loaded)")]
    with pytest.raises(ProfileError, match=rf"run_cuda_gpu_kern_sum\.csv:4: cuda_gpu_kern_sum: '{re.escape(header)}' "
                                           r"is out of range"):
        load_profile(bad)


def test_int64_is_the_limit(tmp_path: Path) -> None:
    ok = tmp_path / "ok_cuda_gpu_kern_sum.csv"
    ok.write_text(_with_cell(1, 1, str(2**63 - 1)))
    tables, warnings = load_profile(ok)
    assert tables["cuda_gpu_kern_sum"][0]["total_time_ns"] == 2**63 - 1 and warnings == []
    ok.write_text(_with_cell(1, 1, str(2**63)))
    with pytest.raises(ProfileError, match=r"ok_cuda_gpu_kern_sum\.csv:2: .*'Total Time \(ns\)' is out of range"):
        load_profile(ok)


def test_import_command_reports_the_400_digit_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Imported here, not at the top: the CLI package is being moved, and this module's other tests
    # must not depend on where it lives.
    from perfconsole.core.cli.main import main

    bad = tmp_path / "big_cuda_gpu_kern_sum.csv"
    bad.write_text(_with_cell(3, 1, "1" * 400))
    assert main(["import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:4: cuda_gpu_kern_sum: 'Total Time (ns)' is out of range" in err
    assert "Traceback" not in err and "OverflowError" not in err

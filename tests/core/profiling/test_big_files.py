"""A large stats file is read without its text (stats_file) where that gives what the text reader gives,
and by the text reader otherwise. Three ways agree, on the real fixtures and on every way a file can
depart from the shape nsys writes (a preamble, blank lines, another report after the table, CRLF, line
breaks splitlines() knows and the CSV libraries do not, a cut last line, a quoted name over a line end):
the row-wise reader (the CSV library switched off), the text reader with it, and the block reader."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfconsole.core.profiling import csv_frames, stats_file, stats_text
from perfconsole.core.profiling.errors import ProfileError
from perfconsole.core.profiling.load import load_profile

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nsys"
KERN = FIXTURES / "moeresearch" / "AT_OFF_CG_OFF_cuda_gpu_kern_sum.csv"
NVTX = FIXTURES / "gptqmodel" / "llama32_1b_layers2_nvtx_sum.csv"
PREAMBLE = ("\nNOTICE: Existing SQLite export found: /tmp/x.sqlite\n\n"
            "Processing [/tmp/x.sqlite] with [/opt/nsys/reports/cuda_gpu_kern_sum.py]... \n")


def both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object, int]:
    """(what the text reader makes of the file, what load_profile makes of it as a large file, how many
    tables the block reader read), each checked against the row-wise reader's."""
    def read(min_bytes: int, row_wise: bool = False):
        with monkeypatch.context() as m:
            m.setattr(stats_file, "FAST_MIN_BYTES", min_bytes)
            if row_wise:
                m.setattr(stats_text, "read_table", lambda *a, **k: None)
            try:
                tables, warnings = load_profile(path)
            except ProfileError as exc:
                return ("error", str(exc))
            return ({k: list(v) for k, v in tables.items()}, warnings)

    calls = []
    real = stats_file.read_stats_file
    monkeypatch.setattr(stats_file, "read_stats_file", lambda *a: calls.append(r := real(*a)) or r)
    row_wise = read(10**15, row_wise=True)
    whole = read(10**15)
    blocks = read(0)
    assert whole == row_wise
    return whole, blocks, sum(1 for c in calls if c is not None)


@pytest.mark.parametrize("engine", csv_frames.ENGINES)
@pytest.mark.parametrize("rel", sorted(str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.csv")))
def test_every_fixture_goes_by_blocks(rel: str, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csv_frames, "ENGINE", engine)
    whole, blocks, fast = both_ways(FIXTURES / rel, monkeypatch)
    assert blocks == whole and fast == 1  # read by blocks, and the same


def _variants(kern: str) -> dict[str, tuple[str, bool]]:
    """Text -> whether the block reader may take it."""
    lines = kern.splitlines(keepends=True)
    return {
        "as nsys writes it": (kern, True),
        "after a stats preamble": (PREAMBLE + kern, True),
        "no final newline": (kern.rstrip("\n"), True),
        "trailing blank lines": (kern + "\n\n\n", True),
        "trailing spaces line": (kern + "   \n", True),
        "a blank line inside": ("".join(lines[:5] + ["\n"] + lines[5:]), True),
        "a second report after it": (kern + "\n" + PREAMBLE.replace("cuda_gpu_kern_sum", "cuda_api_sum")
                                     + (FIXTURES / "moeresearch" / "AT_ON_CG_ON_cuda_api_sum.csv").read_text(), False),
        "a SKIPPED line after it": (kern + "SKIPPED: /tmp/x.sqlite does not contain CUDA kernel data.\n", True),
        "CRLF": (kern.replace("\n", "\r\n"), False),
        "a form feed in a name": (kern.replace("nvjet_sm90", "nvjet\x0csm90", 1), False),
        "U+2028 in a name": (kern.replace("nvjet_sm90", "nvjet\u2028sm90", 1), False),
        "a quoted name over a line end": ("".join(lines[:3] + [lines[3].replace('"', '"\n', 1)] + lines[4:]), True),
        "a cut last line": (kern[:-40], True),
        "a bad number": (kern.replace(",97620,", ",97620x,", 1), True),
    }


@pytest.mark.parametrize("engine", csv_frames.ENGINES)
@pytest.mark.parametrize("variant", sorted(_variants(KERN.read_text())))
def test_departures_from_the_shape_read_alike(variant: str, engine: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csv_frames, "ENGINE", engine)
    text, _ = _variants(KERN.read_text())[variant]
    path = tmp_path / "run_cuda_gpu_kern_sum.csv"
    path.write_bytes(text.encode("utf-8"))
    whole, blocks, _fast = both_ways(path, monkeypatch)
    assert blocks == whole


def test_a_clean_large_file_is_read_by_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kern = KERN.read_text()
    for variant, (text, fast) in _variants(kern).items():
        if not fast or variant in ("a blank line inside", "a quoted name over a line end", "a bad number",
                                   "a SKIPPED line after it", "trailing spaces line", "a cut last line"):
            continue
        path = tmp_path / f"{variant.replace(' ', '_')}_cuda_gpu_kern_sum.csv"
        path.write_text(text)
        assert both_ways(path, monkeypatch)[2] == 1, variant


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.integers(0, 2**20), junk=st.sampled_from(["\n", "\n\n", " \n", "SKIPPED: x\n", "Processing [a] with [b.py]... \n",
                                                      "x,y\n", '"\n', "1,2,3\n", "\t\n", "Range,Style\n"]),
       which=st.sampled_from([KERN, NVTX]))
def test_a_line_put_anywhere_reads_alike(at: int, junk: str, which: Path, tmp_path_factory: pytest.TempPathFactory,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text = which.read_text()
    cut = text.rfind("\n", 0, at % len(text)) + 1  # at a line start
    path = tmp_path_factory.mktemp("junk") / which.name
    path.write_text(text[:cut] + junk + text[cut:])
    whole, blocks, _ = both_ways(path, monkeypatch)
    assert blocks == whole


def test_a_directory_reads_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for p in (FIXTURES / "gpa").glob("*.csv"):
        shutil.copy(p, tmp_path)
    whole, blocks, fast = both_ways(tmp_path, monkeypatch)
    assert blocks == whole and fast == 5

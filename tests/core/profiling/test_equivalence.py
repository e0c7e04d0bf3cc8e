"""The DataFrame reader against the row-wise one it replaced, on every real profiler fixture.

goldens/profile_goldens.json.gz holds what the row-wise reader made of each fixture (written by
profile_goldens.py at the commit before the tables moved to pandas): the tables row by row, the
warnings, the analyses (categories, phase shares, top kernels, softmax against the matmuls, the
forward check) and `perfconsole import`'s text and --json output. Each is computed again here with
each CSV engine there is (pyarrow's reader and pandas' C parser), and with large-file reading (the
file scanned and read a block at a time) forced on for the small fixtures as well as off.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import profile_goldens as goldens
from perfconsole.core.profiling import csv_frames, stats_file

GOLDEN = goldens.load_goldens()
READERS = [(engine, whole) for engine in csv_frames.ENGINES for whole in (True, False)]


def test_every_fixture_has_a_golden(tmp_path: Path) -> None:
    """A fixture added without its golden (or a golden whose fixture is gone) fails here."""
    assert set(goldens.cases(tmp_path)) == set(GOLDEN)
    assert {rel for rel in GOLDEN if "/" in rel and not rel.endswith((" as a log", "/"))} >= set(goldens.fixture_files())


@pytest.mark.parametrize("engine,whole_text", READERS, ids=[f"{e}-{'text' if w else 'blocks'}" for e, w in READERS])
@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_same_as_the_row_wise_reader(case: str, engine: str, whole_text: bool, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csv_frames, "ENGINE", engine)
    if not whole_text:
        monkeypatch.setattr(stats_file, "FAST_MIN_BYTES", 0)
    got = goldens.cases(tmp_path)[case]()
    want = GOLDEN[case]
    text = got.pop("cli_json_text", None)
    assert set(got) == set(want)
    for key in want:
        assert got[key] == want[key], f"{case}: {key} differs"
    if text is not None and want["cli_json"][0] == 0:
        # --json writes the document as json.dumps(doc, indent=1) did, to the byte
        assert text == json.dumps(want["cli_json"][1], indent=1) + "\n"

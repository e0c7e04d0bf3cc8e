"""An import of Nsight Compute's details page alone (tests/fixtures/ncu/details.csv, a real `ncu --csv --page
details` export made on an H100) is a whole run on the command line: `import` prints its kernels with their
durations, `kernels` lists them without `--why`, `kernels --why` fills time, gain and share and sorts by gain, and
`export` carries them in md, csv and json. Every time is marked as ncu's replay time, not a timed step's."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from perfconsole.core.cli.main import main
from helpers import FIXTURES

DETAILS = FIXTURES / "ncu" / "details.csv"
GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"  # 179.01 us under ncu (its Duration)
ATTENTION = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"


def _rows(out: str) -> list[list[str]]:
    return [ln.split("\t") for ln in out.splitlines() if ln and not ln.startswith("#")]


@pytest.fixture
def saved(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "ncu.json"
    assert main(["import", str(DETAILS), "--save", str(path)]) == 0
    capsys.readouterr()
    return path


def test_import_prints_the_kernels_with_their_replay_durations(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(DETAILS)]) == 0
    out = capsys.readouterr().out
    assert "# GPU kernels, ncu replay time (top 5 of 5)" in out
    rows = _rows(out)
    assert [GEMM, "0.179", "1", "179.0"] == [rows[1][-1], rows[1][1], rows[1][2], rows[1][3]]
    assert "# kernel times are Nsight Compute's replay durations" in out
    assert f"perfconsole import {DETAILS} --save RUN.json, then perfconsole kernels RUN.json --why" in out


def test_kernels_without_why_lists_the_imported_kernels_by_replay_time(
        saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# import details.csv: kernels by ncu replay time (top 5 of 5)")
    rows = _rows(out)[1:]
    assert [r[-1] for r in rows[:2]] == [GEMM, ATTENTION] and rows[0][1:4] == ["0.179", "1", "179.0"]
    assert [float(r[1]) for r in rows] == sorted((float(r[1]) for r in rows), reverse=True)
    assert main(["kernels", str(saved), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernel_times"] == "ncu replay" and doc["kernels"][0]["total_time_ns"] == 179010


def test_why_fills_time_gain_and_share_from_the_durations_and_sorts_by_gain(
        saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(saved), "--why"]) == 0
    out = capsys.readouterr().out
    assert "(Nsight Compute; times: ncu replay time)" in out.splitlines()[0]
    header, *rows = _rows(out)
    assert header[:3] == ["gain (ms, replay)", "time (ms, replay)", "step (%)"]
    assert len(rows) == 5 and all("-" not in r[:3] for r in rows)
    gemm = next(r for r in rows if r[-1] == GEMM)
    assert gemm[:3] == ["0.018", "0.179", "42.2"]      # 0.179 ms x (1 - 0.8996), 179.01 of 424.29 us in all
    gains = [float(r[0]) for r in rows]
    assert gains == sorted(gains, reverse=True) and rows[0][-1] == ATTENTION  # latency-bound: most to gain
    assert main(["kernels", str(saved), "--why", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernel_times"] == "ncu replay"
    assert any("durations under ncu's replay" in n for n in doc["notes"])


def test_a_snapshot_imported_before_the_replay_times_says_how_to_get_them(
        saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An import saved with only the ncu tables (as `import --save` wrote it before): one line naming the import
    that makes the times, which then gives them."""
    doc = json.loads(saved.read_text())
    tables = doc["data"]["profile"]["tables"]
    del tables["cuda_gpu_kern_sum"], tables["ncu_run"][0]["kernel_times"]
    saved.write_text(json.dumps(doc))
    assert main(["kernels", str(saved)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "saved without its kernels' replay times" in err
    again = err.split("import them again: ")[1].split()
    assert again == ["perfconsole", "import", str(DETAILS), "--save", str(saved), "--force"]
    assert main(again[1:]) == 0 and main(["kernels", str(saved)]) == 0
    assert "kernels by ncu replay time (top 5 of 5)" in capsys.readouterr().out


def test_export_md_carries_the_kernels_the_why_and_the_roofline(
        saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(saved), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "kernel times are Nsight Compute's replay durations" in md
    assert "Kernel time in all (ncu replay time): 0.424 ms." in md
    assert "## Why the kernels take their time (Nsight Compute)" in md
    assert "| # | kernel | ncu replay (ms) | could save (ms of replay) |" in md
    assert f"| 3 | {GEMM} | 0.179 | 0.018 | 90.0 | 69.6 | 767.77 |" in md
    assert "Roofline (log-log" in md and "0.179 ms of ncu replay" in md


def test_export_csv_is_a_row_per_kernel_with_ncus_figures(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(saved), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["kernel"] for r in rows][:2] == [GEMM, ATTENTION] and len(rows) == 5
    gemm = rows[0]
    assert (gemm["times"], gemm["total_ms"], gemm["count"], gemm["ncu_replay_us"]) == ("ncu replay", "0.17901", "1",
                                                                                       "179.01")
    assert (gemm["compute_pct"], gemm["bound"], gemm["precision"]) == ("89.96", "compute", "bf16")


def test_export_json_says_the_times_are_replays_and_holds_the_why(
        saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(saved), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["spec"] is None and doc["profile"]["kernel_times"] == "ncu replay"
    why = {k["name"]: k for k in doc["profile"]["why"]["kernels"]}
    assert set(why) >= {GEMM, ATTENTION} and why[GEMM]["ms_per_step"] == pytest.approx(0.17901)


def test_import_help_names_every_input(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["import", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for words in ("Nsight Compute's CSV pages or .ncu-rep", "torch.profiler trace (torch_trace.json)",
                  "ncu's `--csv --page details|raw` output", "an nvprof log", ".nsys-rep"):
        assert words in text, words

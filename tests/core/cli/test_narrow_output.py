"""The CLI's tables at 80 columns and into pipes, through the real entry point: numbers stay whole,
long names are shortened in the middle, and a pipe gets tab-separated text that awk can split."""
from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import pty
import re
import select
import statistics
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from perfconsole.core.stats import interval_text
from perfconsole.core.cli.tables import CliTable, Column, fit_widths, middle_ellipsis
from rich.cells import cell_len
from rich.console import Console
from helpers import PC, ROOT

KERNELS = ROOT / "tests/fixtures/nsys/gpa/demo_cuda_gpu_kern_sum.csv"
NVTX = ROOT / "tests/fixtures/nsys/gptqmodel"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)")
BOX = set("─━│┃┏┓┗┛┡┩╇╈┼┬┴├┤└┘┌┐╭╮╰╯═║")
PHASES = {"forward", "backward", "optimizer", "total"}
RUN = ["run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2", "--warmup", "1", "--steps", "3"]


def clean_env(**extra: str) -> dict[str, str]:
    """The user's environment without anything that would override the terminal's own width or mode."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    return {**env, "TERM": "xterm-256color", "PYTHONIOENCODING": "utf-8", **extra}


def in_terminal(args: list[str], cols: int = 80, **env: str) -> tuple[int, list[str]]:
    """Run the CLI with stdout on a pseudo-terminal `cols` wide; its exit code and screen lines."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, cols, 0, 0))
    p = subprocess.Popen([*PC, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL,
                         env=clean_env(**env), cwd=ROOT)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 240
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not data:
                break
            out += data
        elif p.poll() is not None and not select.select([master], [], [], 0.2)[0]:
            break
    os.close(master)
    code = p.wait(timeout=60)
    text = ANSI.sub("", out.decode("utf-8")).replace("\r\n", "\n")
    return code, text.split("\n")


def piped(args: list[str]) -> str:
    out = subprocess.run([*PC, *args], capture_output=True, text=True, timeout=240, env=clean_env(), cwd=ROOT,
                         check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout


def csv_kernels() -> list[dict[str, str]]:
    """The fixture's rows, read here without the package's own reader."""
    with KERNELS.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return sorted(rows, key=lambda r: -int(r["Total Time (ns)"]))


def table_rows(lines: list[str], title: str) -> tuple[str, list[str]]:
    """(the last header line, the data lines) of the fitted table titled `title`."""
    start = next(i for i, line in enumerate(lines) if title in line)
    rule = next(i for i in range(start, len(lines)) if lines[i].strip() and set(lines[i].strip()) <= set("─-"))
    end = next((i for i in range(rule + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[rule - 1], [line for line in lines[rule + 1:end] if line.strip()]


def phase_cells(lines: list[str], title: str) -> dict[str, list[str]]:
    """Each phase's printed cells, from the fitted table or, where a loaded machine's slow steps make the
    numbers too wide for one row, from the stacked `header: value` form the CLI falls back to."""
    start = next(i for i, line in enumerate(lines) if title in line)
    if lines[start + 2].startswith("phase:"):  # stacked: one `header: value` line per cell, a blank between rows
        out: dict[str, list[str]] = {}
        i = start + 2
        while i < len(lines) and lines[i].startswith("phase:"):
            end = next((j for j in range(i, len(lines)) if not lines[j].strip()), len(lines))
            block = [line.split(":", 1)[1].strip() for line in lines[i:end]]
            out[block[0]] = " ".join(block[1:]).split()
            i = end + 1
        return out
    _, rows = table_rows(lines, title)
    # Labels may be cut at the end ("backw…") where the numbers take the room.
    return {phase: row.split()[1:] for row in rows for phase in PHASES
            if phase == row.split()[0] or (row.split()[0].endswith("…") and phase.startswith(row.split()[0][:-1]))}


def test_kernel_table_at_80_columns_keeps_every_number_and_shortens_names_in_the_middle() -> None:
    code, lines = in_terminal(["import", str(KERNELS)])
    assert code == 0, "\n".join(lines)
    assert all(cell_len(line) <= 80 for line in lines), [line for line in lines if cell_len(line) > 80]
    header, rows = table_rows(lines, "GPU kernels")
    assert len(rows) == 20
    name_at = header.index("name")
    shortened = 0
    for row, k in zip(rows, csv_kernels()):
        want = [f"{float(k['Time (%)']):.1f}", f"{int(k['Total Time (ns)']) / 1e6:,.3f}", k["Instances"],
                f"{float(k['Avg (ns)']) / 1e3:,.1f}"]
        if rows.index(row) < 10:
            assert row.split()[:4] == want, (row, want)
        cell, name = row[name_at:].rstrip(), k["Name"]
        if cell == name:
            continue
        shortened += 1
        assert cell.count("…") == 1 and cell_len(cell) < cell_len(name), (cell, name)
        head, tail = cell.split("…")
        assert len(head) >= 8 and len(tail) >= 8 and name.startswith(head) and name.endswith(tail), (cell, name)
    assert shortened >= 10  # the fixture's long CUTLASS / cuBLAS / NCCL names


def test_kernel_table_in_an_ascii_terminal_shortens_with_three_dots() -> None:
    code, lines = in_terminal(["import", str(KERNELS)], PYTHONIOENCODING="ascii")
    assert code == 0, "\n".join(lines)
    assert all(line.isascii() and len(line) <= 80 for line in lines)
    _, rows = table_rows(lines, "GPU kernels")
    assert any("..." in row for row in rows)


def test_piped_import_is_tab_separated_plain_text_with_full_names() -> None:
    out = piped(["import", str(KERNELS)])
    assert "\x1b[" not in out and not BOX & set(out) and "…" not in out
    blocks = [b.splitlines() for b in out.split("\n\n") if b.strip()]
    tables = [[line for line in b if not line.startswith("#")] for b in blocks]
    tables = [t for t in tables if t]
    assert len(tables) == 2  # kernels, then time by category
    for t in tables:
        width = len(t[0].split("\t"))
        assert width >= 3 and all(len(line.split("\t")) == width for line in t), t
    header, *rows = tables[0]
    assert header.split("\t") == ["time (%)", "total (ms)", "count", "avg (us)", "category", "name"]
    for row, k in zip(rows, csv_kernels()):
        fields = row.split("\t")
        assert fields[5] == k["Name"]  # verbatim, however long
        assert fields[1] == f"{int(k['Total Time (ns)']) / 1e6:.3f}" and fields[2] == k["Instances"]
        assert float(fields[3]) == pytest.approx(float(k["Avg (ns)"]) / 1e3, abs=0.05)
    assert len(rows) == 20


def test_piped_numbers_lose_their_thousands_separators_and_an_interval_keeps_its_comma() -> None:
    t = CliTable("run", [Column("phase", "label"), Column("median (ms)"), Column("95% CI (ms)")])
    t.add_row("total", "1,234,567.500", interval_text(3.083, 8115.122))
    header, row = t.plain().splitlines()[1:3]
    assert header.split("\t") == ["phase", "median (ms)", "95% CI (ms)"]
    assert row.split("\t") == ["total", "1234567.500", "[3.083, 8115.122]"]


def test_piped_nvtx_table_splits_evenly_and_notes_are_comments() -> None:
    out = piped(["import", str(NVTX)])
    assert "\x1b[" not in out and not BOX & set(out)
    lines = out.splitlines()
    header = lines.index("time (%)\ttotal (ms)\tcount\tavg (ms)\tdomain\trange")
    assert lines[header - 1].startswith("# NVTX ranges")
    rows = lines[header + 1:lines.index("", header)]
    assert rows and all(len(r.split("\t")) == 6 for r in rows)
    assert all(float(r.split("\t")[1]) >= 0 for r in rows)  # no thousands separators for awk
    assert any(line.startswith("# also loaded: ") for line in lines)


@pytest.mark.parametrize("cols", [80, 44])  # 44 is too narrow for the numbers side by side: rows stack
def test_run_table_in_a_narrow_terminal_prints_every_number_in_full(tmp_path: Path, cols: int) -> None:
    save = tmp_path / "run.json"
    code, lines = in_terminal([*RUN, "--save", str(save)], cols=cols)
    assert code == 0, "\n".join(lines)
    assert all(cell_len(line) <= cols for line in lines), [line for line in lines if cell_len(line) > cols]
    data = json.loads(save.read_text())["data"]
    by_phase = phase_cells(lines, data["name"])
    assert set(by_phase) == {"forward", "backward", "total"}
    for phase, cells in by_phase.items():
        values = [s[f"{phase}_ms"] for s in data["steps"]]
        stat = data["summary"][f"{phase}_ms"]
        want = [f"{v:,.3f}" for v in (statistics.mean(values), statistics.stdev(values), statistics.median(values))]
        # Beside the median its interval: three steps are too few for one, which splits into three words here.
        assert stat["ci95_low"] is None
        assert cells == [*want, "too", "few", "steps", f"{min(values):,.3f}", f"{max(values):,.3f}"], (phase, cells)
    assert any("tokens/s" in line for line in lines)


def test_run_table_piped_from_a_saved_run_is_plain(tmp_path: Path) -> None:
    save = tmp_path / "run.json"
    piped([*RUN, "--save", str(save), "--json"])
    from perfconsole.core import store
    from perfconsole.core.cli.run import summary_table

    buf = io.StringIO()
    Console(file=buf, width=40).print(summary_table(store.load(save)))
    lines = buf.getvalue().splitlines()
    assert lines[1].split("\t")[:2] == ["phase", "mean (ms)"]
    assert all(len(line.split("\t")) == 7 for line in lines[1:5])
    assert max(map(len, lines)) > 40  # a pipe has no width to crop to


def wide_table(n_rows: int = 5) -> CliTable:
    t = CliTable("wide", [Column("total (ms)"), Column("count"), Column("category", "label"), Column("name", "name")])
    for i in range(n_rows):
        t.add_row(f"{123_456.789 * (i + 1):,.3f}", str(10 ** i), "communication",
                  f"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x128_32x3_nn_align{i}>(Params)")
    return t


@pytest.mark.parametrize("width", [30, 40, 50, 60, 80, 120, 200])
def test_fitted_table_never_cuts_a_number_at_any_width(width: int) -> None:
    buf = io.StringIO()
    t = wide_table()
    Console(file=buf, width=width, force_terminal=True, color_system=None, legacy_windows=False).print(t)
    text = buf.getvalue()
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    for row in t.rows:
        assert row[0].plain in text and row[1].plain in text  # whole, with their thousands separators
    if fit_widths(t, width) is None:
        assert "total (ms):" in text  # too narrow for the numbers side by side: one block per row


def test_middle_ellipsis_keeps_the_start_and_the_end() -> None:
    name = "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x128_32x3_nn_align4>(T1::Params)"
    short = middle_ellipsis(name, 50)
    assert cell_len(short) == 50 and short.startswith("void cutlass::Kernel2<") and short.endswith("T1::Params)")
    assert middle_ellipsis(name, 40, "...").count("...") == 1 and len(middle_ellipsis(name, 40, "...")) == 40
    assert middle_ellipsis("fusion_52", 40) == "fusion_52"

"""The roofline picture on a real `--profile ncu` run (tests/fixtures/ncu/small_train_h100.json, an H100): each
kernel with counted FLOPs at its intensity and rate under the run's measured roofs, the others listed."""
from __future__ import annotations

import math

from perfconsole.core import store
from perfconsole.core.reports.kernel_why import kernel_why, peaks_of
from perfconsole.core.reports.roofline import HEIGHT, WIDTH, roofline_lines
from perfconsole.core.reports.run import markdown
from tests.helpers import FIXTURES

RUN = store.load(FIXTURES / "ncu" / "small_train_h100.json")
WHY = kernel_why(RUN)
GEMM = "nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN"


def _grid(lines: list[str]) -> list[str]:
    return [line.split("|", 1)[1] for line in lines[1:1 + HEIGHT]]


def _where(grid: list[str], mark: str) -> list[tuple[int, int]]:
    return [(r, c) for r, line in enumerate(grid) for c, ch in enumerate(line) if ch == mark]


def test_the_gemm_sits_right_of_the_ridge_under_its_roof_and_the_elementwise_kernels_on_the_slope():
    gemm = next(r for r in WHY.rows if r["name"] == GEMM)
    lines = roofline_lines(WHY.rows, peaks_of(RUN), highlight=gemm["key"])
    grid = _grid(lines)
    assert all(len(line) == WIDTH for line in grid)
    [(row, col)] = _where(grid, "@")
    # 410.9 TFLOP/s at 408.8 FLOP/byte: right of the bf16 ridge (260), one row under its flat roof (784 TFLOP/s)
    roof_cols = [c for c, ch in enumerate(grid[row - 1]) if ch == "-"]
    assert roof_cols and col >= min(roof_cols) and grid[row - 1][col] == "-"
    assert gemm["intensity"] > gemm["ridge"] and gemm["side"] == "compute"
    # every other placed kernel is on the memory side: left of the GEMM, lower
    others = _where(grid, "•") + _where(grid, "·")
    assert others and all(c < col and r > row for r, c in others)
    assert "bf16 784 TFLOP/s (ridge 260)" in "\n".join(lines) and "copy 3,010 GB/s" in "\n".join(lines)


def test_kernels_without_counted_flops_are_listed_not_placed_and_each_placed_one_is_in_the_legend():
    lines = roofline_lines(WHY.rows, peaks_of(RUN))
    zero = [i + 1 for i, r in enumerate(WHY.rows) if not (r.get("intensity") or 0) > 0 or not (r.get("tflops") or 0) > 0]
    assert len(zero) == 5
    assert lines[-1].startswith(f"not placed (no counted FLOPs, so no intensity): {len(zero)} kernels")
    assert all(f"#{n}" in lines[-1] for n in zero)
    placed = [line for line in lines if line.startswith("  #")]
    assert len(placed) == len(WHY.rows) - len(zero)
    marks = sum(len(_where(_grid(lines), m)) for m in "●•·")
    assert 0 < marks <= len(placed)  # two kernels at one point share a mark
    below = next(line for line in lines if line.startswith("marks:"))
    assert "on the bottom edge: #13, #17" in below  # 0.00 TFLOP/s: more than five decades under the top roof


def test_ascii_marks_and_no_picture_without_placeable_kernels():
    lines = roofline_lines(WHY.rows, peaks_of(RUN), ascii_only=True)
    assert all(ch.isascii() for line in lines[:HEIGHT + 3] for ch in line)
    assert roofline_lines([r for r in WHY.rows if not (r.get("tflops") or 0) > 0], peaks_of(RUN)) == []
    assert math.isclose(peaks_of(RUN)["bandwidth_gbps"], 3009.77, rel_tol=1e-3)


def test_the_markdown_export_has_the_why_table_and_the_picture():
    md = markdown(RUN)
    assert "## Why the kernels take their time (Nsight Compute)" in md
    assert f"| 8 | {GEMM} | 0.588 |" in md
    block = md.split("Roofline (log-log; the run's measured peaks as roofs):", 1)[1]
    assert block.lstrip().startswith("```") and "FLOP/byte" in block

"""The roofline picture of a run's Nsight Compute kernels, in text: log-log, arithmetic intensity (FLOP per byte of
DRAM) across, achieved TFLOP/s up; the roofs are the run's measured peaks (the copy bandwidth's slope, then each
precision's matmul peak as a flat roof); each kernel a mark at its point, sized by its share of the step
(`●` 10 % or more, `•` 1 % or more, `·` less), numbered as the why table ranks it (by what fixing it could save).

Kernels that did no counted FLOPs (copies, most elementwise work on integers) have no intensity: they are listed
under the picture with their time, not placed. Plain text, so the console, the CLI and the Markdown export (a code
block) draw the same picture; `ascii` marks for consoles without block characters.
"""
from __future__ import annotations

import math
from typing import Any

WIDTH, HEIGHT = 56, 14
DECADES = 5  # of TFLOP/s shown, down from the top roof
MARKS = ("●", "•", "·")
ASCII_MARKS = ("O", "o", ".")


def _ok(v: Any) -> bool:
    return isinstance(v, (int, float)) and not math.isnan(v) and v > 0


def _mark(share: float | None, marks: tuple[str, str, str]) -> str:
    s = share or 0.0
    return marks[0] if s >= 0.10 else marks[1] if s >= 0.01 else marks[2]


def roofline_lines(rows: list[dict[str, Any]], peaks: dict[str, Any] | None, ascii_only: bool = False,
                   highlight: str | None = None, width: int = WIDTH, height: int = HEIGHT,
                   replay: bool = False) -> list[str]:
    """The picture and its legend; [] where no kernel has both an intensity and a FLOP rate. `highlight`: the key
    of a kernel drawn as `@` (the console's kernel under the cursor). `replay`: the times are ncu's replay
    durations (an import of its pages alone), not per step."""
    marks = ASCII_MARKS if ascii_only else MARKS
    per, whole = ("ms of ncu replay", "all the replay time") if replay else ("ms/step", "the step")
    placed = [(i + 1, r) for i, r in enumerate(rows) if _ok(r.get("intensity")) and _ok(r.get("tflops"))]
    if not placed:
        return []
    tflops_peaks = {k: v for k, v in ((peaks or {}).get("matmul_tflops") or {}).items() if _ok(v)}
    bw = (peaks or {}).get("bandwidth_gbps")
    used = sorted({r.get("precision") for _, r in placed if r.get("precision") in tflops_peaks},
                  key=lambda p: -tflops_peaks[p])
    xs = [r["intensity"] for _, r in placed] + ([tflops_peaks[p] * 1e3 / bw for p in used] if _ok(bw) else [])
    ys = [r["tflops"] for _, r in placed] + [tflops_peaks[p] for p in used]
    xlo, xhi = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)) + 0.3)
    yhi = math.ceil(math.log10(max(ys)) + 0.1)
    ylo = max(math.floor(math.log10(min(ys))), yhi - DECADES)  # a kernel below sits on the bottom edge

    def col(x: float) -> int:
        return min(width - 1, max(0, int((math.log10(x) - xlo) / (xhi - xlo) * width)))

    def row(y: float) -> int:
        return min(height - 1, max(0, height - 1 - int((math.log10(y) - ylo) / (yhi - ylo) * height)))

    grid = [[" "] * width for _ in range(height)]
    for p in used:  # each precision's roof: the bandwidth's slope up to its ridge, then flat
        for c in range(width):
            x = 10 ** (xlo + (c + 0.5) / width * (xhi - xlo))
            y = min(tflops_peaks[p], bw * 1e9 * x / 1e12) if _ok(bw) else tflops_peaks[p]
            if 10 ** ylo <= y <= 10 ** yhi and grid[row(y)][c] == " ":
                grid[row(y)][c] = "-" if y >= tflops_peaks[p] else "/"
    for _, r in sorted(placed, key=lambda nr: nr[1].get("step_share") or 0.0):  # the largest drawn last
        grid[row(r["tflops"])][col(r["intensity"])] = "@" if highlight and r.get("key") == highlight else _mark(
            r.get("step_share"), marks)
    label_w = 8
    out = [f"{'TFLOP/s':>{label_w}}"]
    for i, line in enumerate(grid):
        tick = f"{10 ** yhi:g}" if i == 0 else f"{10 ** ylo:g}" if i == height - 1 else ""
        out.append(f"{tick:>{label_w}} |{''.join(line)}")
    out.append(" " * label_w + " +" + "-" * width)
    lo, hi = f"{10 ** xlo:g}", f"{10 ** xhi:g} FLOP/byte"
    out.append(" " * (label_w + 2) + lo + " " * max(1, width - len(lo) - len(hi)) + hi)
    roofs = ", ".join(f"{p} {tflops_peaks[p]:,.0f} TFLOP/s (ridge {tflops_peaks[p] * 1e3 / bw:,.0f})" if _ok(bw)
                      else f"{p} {tflops_peaks[p]:,.0f} TFLOP/s" for p in used)
    out.append(f"roofs, the run's measured peaks: {'copy ' + format(bw, ',.0f') + ' GB/s (/), ' if _ok(bw) else ''}"
               f"{roofs or 'none for these precisions'} (-)")
    below = [n for n, r in placed if r["tflops"] < 10 ** ylo]
    out.append(f"marks: {marks[0]} 10 % of {whole} or more, {marks[1]} 1 % or more, {marks[2]} less"
               + (", @ the kernel shown" if highlight else "")
               + (f"; below {10 ** ylo:g} TFLOP/s, on the bottom edge: {', '.join(f'#{n}' for n in below)}" if below else ""))
    for rank, r in placed:
        out.append(f"  #{rank} {_mark(r.get('step_share'), marks)} {r.get('intensity'):,.2f} FLOP/byte, "
                   f"{r.get('tflops'):,.2f} TFLOP/s {r.get('precision') or ''}, {r.get('ms_per_step') or 0:,.3f} {per}: "
                   f"{_short(r.get('name'))}")
    left = [(i + 1, r) for i, r in enumerate(rows) if (i + 1, r) not in placed]
    if left:
        ms = sum(r.get("ms_per_step") or 0.0 for _, r in left)
        out.append(f"not placed (no counted FLOPs, so no intensity): {len(left)} kernels, {ms:,.3f} {per} "
                   f"({', '.join(f'#{n}' for n, _ in left)})")
    return out


def _short(name: Any, n: int = 60) -> str:
    text = str(name or "")
    return text if len(text) <= n else text[: n - 1] + "…"

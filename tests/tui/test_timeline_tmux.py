"""The Timeline pane in the real console, driven in tmux at 120x40 and 80x24 as a person would: open a run snapshot
whose profile is the real H200 trace (llama 1B, CUDA graphs, 3 steps; its tables as the worker builds them, the
trace as its file), make it the current run, open the Timeline tab (8), zoom in (+), pan (Right), select the next
kernel (n), go to the next idle gap (g) and press Enter into the Kernels pane. Each screen is read with
`tmux capture-pane -p` and held to figures this test computes from the trace's own events: the window's span and
start, the selected kernel's name, start, duration, grid and block, the gap's ends, and the kernels the Kernels
pane keeps once filtered to the kernel after the gap."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import time
from collections.abc import Callable

import numpy as np
import pytest
from helpers import script_module
from test_timeline_pane import TRACE, trace_record

from perfconsole.core import store

pytestmark = [pytest.mark.slow, pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]

WAIT_S = 60.0   # a loaded machine running other test files beside this one
UNIT_NS = {"ms": 1e6, "us": 1e3, "ns": 1.0}
LANE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "gpu_user_annotation", "cuda_runtime",
             "cuda_driver")   # the events that make the pane's lanes: GPU work, ranges, the runtime's launches
WINDOW = re.compile(r"([\d,.]+)–([\d,.]+)\s+(ms|us)\s+\(([\d,.]+)\s+(ms|us)\)")
KERNEL = re.compile(r"^(\w+) · ([\d,.]+) (ms|us|ns) at ([\d,.]+) (ms|us) · grid \((\d+),(\d+),(\d+)\) "
                    r"block \((\d+),(\d+),(\d+)\)")
GAP = re.compile(r"^idle gap [\d,.]+ (?:ms|us|ns) at ([\d,.]+)–([\d,.]+) (ms|us); then (.+)$")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


class Trace:
    """The fixture's own events in the pane's clock: ns from the earliest timed event."""

    def __init__(self) -> None:
        events = [e for e in json.load(gzip.open(TRACE, "rt"))["traceEvents"]
                  if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) and isinstance(e.get("dur"), (int, float))]
        origin = min(e["ts"] for e in events)

        def ns(e) -> tuple[int, int]:
            start = int(np.rint((e["ts"] - origin) * 1000.0))
            return start, start + int(np.rint(max(0.0, e["dur"]) * 1000.0))

        lanes = [ns(e) for e in events if e.get("cat") in LANE_CATS]
        self.span = (min(s for s, _ in lanes), max(e for _, e in lanes))
        self.kernels = sorted((*ns(e), e["name"], tuple(e["args"]["grid"]), tuple(e["args"]["block"]))
                              for e in events if e.get("cat") == "kernel" and e["args"].get("stream") == 7)
        self.gpu_names = {e["name"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
        busy = sorted(ns(e) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
        merged: list[list[int]] = []
        for a, b in busy:
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        edges = [self.span[0], *[x for pair in merged for x in pair], self.span[1]]
        self.gaps = [(a, b) for a, b in zip(edges[::2], edges[1::2]) if b - a >= 10_000]   # 10 us, as the pane


def _screen_when(tmux, check: Callable[[str], object], what: str, timeout: float = WAIT_S) -> str:
    """The first screen `check` accepts, read every 0.1 s until `timeout` (a screen mid-redraw, where the lines
    `check` reads are not there yet, is not accepted)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        screen = tmux.screen()
        try:
            if check(screen):
                return screen
        except (StopIteration, IndexError, AssertionError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what} never showed; screen:\n{tmux.screen()}")


def _window(screen: str) -> tuple[float, float, float]:
    """The window the pane's title line shows: (start, end, span) in ns."""
    m = WINDOW.search(screen)
    assert m is not None, screen
    return (_num(m.group(1)) * UNIT_NS[m.group(3)], _num(m.group(2)) * UNIT_NS[m.group(3)],
            _num(m.group(4)) * UNIT_NS[m.group(5)])


def _below_axis(screen: str, n: int = 2) -> tuple[str, list[str]]:
    """The time axis line and the n lines under it (the selection's details)."""
    lines = screen.splitlines()
    i = next(i for i, line in enumerate(lines) if re.match(r"^t \((ms|us)\)", line))
    return lines[i], [line.rstrip() for line in lines[i + 1:i + 1 + n]]


def _shown(name_cell: str) -> str:
    """A name as the pane shows it, cut at the terminal's edge ("…" last)."""
    return name_cell.removesuffix("…")


@pytest.mark.parametrize("width, height", [(120, 40), (80, 24)])
def test_zoom_pan_kernel_gap_and_enter_in_a_terminal(tmp_path, width, height):
    trace = Trace()
    snapshot = tmp_path / "h200_trace_run.json"
    record = trace_record()
    store.save(record, snapshot)
    chaos = script_module("chaos_console")
    tmux = chaos.Tmux(tmp_path)
    tmux.console(width, height, tmp_path / "data")
    try:
        _screen_when(tmux, lambda s: "1 Launch" in s, "the console")
        tmux.keys("5")
        _screen_when(tmux, lambda s: "0 marked" in s, "Runs")
        tmux.keys("o")
        _screen_when(tmux, lambda s: "Open a snapshot" in s, "the open dialog")
        tmux("send-keys", "-t", tmux.session, "-l", str(snapshot))
        tmux.keys("Enter")
        _screen_when(tmux, lambda s: "1 run, 0 marked" in s, "the opened run in Runs")
        tmux.keys("Enter")   # the opened run becomes the current one
        _screen_when(tmux, lambda s: "8/8 measured steps" in s, "the run in Live")
        tmux.keys("8")
        whole = _screen_when(tmux, lambda s: ">gpu0 s7" in s and WINDOW.search(s), "the timeline's rows")

        # the whole trace: from its first lane event to its last, to the microsecond
        t0, t1, span = _window(whole)
        assert abs(t0 - trace.span[0]) <= 500 and abs(t1 - trace.span[1]) <= 500 and abs(span - (t1 - t0)) <= 1000

        tmux.keys("+")
        zoomed = _screen_when(tmux, lambda s: WINDOW.search(s) and _window(s) != (t0, t1, span), "the zoomed window")
        z0, z1, zspan = _window(zoomed)
        assert abs(zspan - span / 2) <= 1000 and t0 <= z0 and z1 <= t1 + 500   # half as wide, inside the whole
        axis, _ = _below_axis(zoomed)
        tick = _num(re.search(r"\|([\d,.]+)", axis).group(1)) * UNIT_NS[re.match(r"^t \((ms|us)\)", axis).group(1)]
        assert abs(tick - z0) <= 0.5 * UNIT_NS["ms"], axis   # the axis starts where the window does

        tmux.keys("Right")
        panned = _screen_when(tmux, lambda s: WINDOW.search(s) and _window(s)[0] != z0, "the panned window")
        p0, p1, pspan = _window(panned)
        assert abs(pspan - zspan) <= 1000 and abs((p0 - z0) - zspan / 4) <= 1000   # a quarter of the span right

        tmux.keys("n")
        selected = _screen_when(tmux, lambda s: KERNEL.match(_below_axis(s)[1][1]), "the selected kernel's details")
        _, (name_line, stats) = _below_axis(selected)
        m = KERNEL.match(stats)
        at = _num(m.group(4)) * UNIT_NS[m.group(5)]
        dur = _num(m.group(2)) * UNIT_NS[m.group(3)]
        grid, block = tuple(int(x) for x in m.group(6, 7, 8)), tuple(int(x) for x in m.group(9, 10, 11))
        found = [k for k in trace.kernels if abs(k[0] - at) <= 500 and k[2].startswith(_shown(name_line))]
        assert len(found) == 1, (name_line, stats)
        kernel = found[0]
        assert (kernel[3], kernel[4]) == (grid, block)
        assert abs((kernel[1] - kernel[0]) - dur) <= 0.05 * UNIT_NS[m.group(3)]   # to the decimal shown
        # the first kernel of the lane at the window's start or after it
        assert kernel[0] >= p0 - 500 and not [k for k in trace.kernels if p0 + 500 < k[0] < kernel[0]]

        tmux.keys("g")
        gapped = _screen_when(tmux, lambda s: GAP.match(_below_axis(s, 1)[1][0]), "the idle gap's details")
        m = GAP.match(_below_axis(gapped, 1)[1][0])
        ga, gb = _num(m.group(1)) * UNIT_NS[m.group(3)], _num(m.group(2)) * UNIT_NS[m.group(3)]
        gap = next(g for g in trace.gaps if g[0] > kernel[0])    # the device's next idle gap after that kernel
        assert abs(ga - gap[0]) <= 500 and abs(gb - gap[1]) <= 500, (m.group(0), gap)
        after = next(k for k in trace.kernels if k[0] >= gap[1])  # the kernel the device waited for
        assert after[2].startswith(_shown(m.group(4))), (m.group(4), after[2])

        tmux.keys("Enter")
        matching = {n for n in trace.gpu_names if after[2].lower() in n.lower()}

        def kernel_rows(screen: str) -> tuple[list[str], str]:
            """The Kernels table's rows and the line above its header (the filter field)."""
            lines = screen.splitlines()
            head = next(i for i, line in enumerate(lines) if re.match(r"^ total ms\s+count", line))
            rows = []
            for line in lines[head + 1:]:
                if not re.match(r"^\s+[\d,.]+\s+\d+\s+[\d,.]+\s", line):
                    break
                rows.append(line)
            return rows, lines[head - 1]

        def filtered(screen: str) -> bool:
            # the field fills first and the table follows on a later frame: wait for both
            rows, field = kernel_rows(screen)
            return (after[2][:20] in field or after[2][-20:] in field) and len(rows) == len(matching)

        kernels = _screen_when(tmux, filtered, "the Kernels pane filtered to the kernel after the gap")
        rows, field = kernel_rows(kernels)
        # filtered to the kernel's name: its field shows the name, the table the kernels whose names hold it
        assert after[2][:20] in field or after[2][-20:] in field, field
        assert len(rows) == len(matching) >= 1, (rows, matching)
        assert all(after[2][:8] in row for row in rows)
        screens = [whole, zoomed, panned, selected, gapped, kernels]
    finally:
        tmux("kill-server")
    # the console drew at the terminal's size, and no line ran past its edge
    for screen in screens:
        lines = screen.splitlines()
        assert len(lines) == height and max(len(line) for line in lines) <= width, screen

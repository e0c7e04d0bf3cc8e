"""The kernel detail (why a kernel takes its time) and its roofline picture in the real console, driven in tmux at
80x24 and 120x40 as a person would: open the snapshot of a real `--profile ncu` run (Llama-3.2-1B on an H200,
docs/results/llama1B_why_h200/after/ncu_run.json), make it the current run, filter the Kernels pane down to the
attention backward, press Enter, and page through the detail. PERFCONSOLE_EVIDENCE_DIR, where set, receives each
size's pages as text (docs/results/llama1B_why_h200/console_*.txt were made so)."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import ROOT, script_module

pytestmark = [pytest.mark.slow, pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")]

SNAPSHOT = ROOT / "docs" / "results" / "llama1B_why_h200" / "after" / "ncu_run.json"
WAIT_S = 60.0  # a loaded 2-core machine running other test files beside this one


def _pages(tmux, limit: int = 30, settle_s: float = 5.0) -> list[str]:
    """The detail's screens, from its top down, PageDown after PageDown until the detail stops moving. A loaded
    machine may take longer than a fixed pause to redraw, and the tab bar's underline animates on its own: so each
    PageDown waits up to settle_s for the rows below the tabs to change, and the detail's end is the first PageDown
    that changes nothing there in that time."""
    def below_tabs(screen: str) -> list[str]:
        return screen.splitlines()[2:]

    pages = [tmux.screen()]
    for _ in range(limit):
        tmux.keys("PageDown")
        if not _wait_until(lambda: below_tabs(tmux.screen()) != below_tabs(pages[-1]), settle_s):
            break
        pages.append(_settled(tmux, below_tabs, settle_s))
    return pages


def _settled(tmux, part, timeout: float) -> str:
    """The screen once its part has stayed the same over two reads 0.2 s apart (a redraw finished), or at timeout."""
    end = time.monotonic() + timeout
    screen = tmux.screen()
    while time.monotonic() < end:
        time.sleep(0.2)
        again = tmux.screen()
        if part(again) == part(screen):
            return again
        screen = again
    return screen


def _wait_until(check, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("width, height", [(80, 24), (120, 40)])
def test_the_kernel_detail_and_its_roofline_read_in_a_terminal(tmp_path, width, height):
    chaos = script_module("chaos_console")
    tmux = chaos.Tmux(tmp_path)
    tmux.console(width, height, tmp_path / "data")
    try:
        assert tmux.wait_for("1 Launch", WAIT_S), tmux.screen()
        tmux.keys("5")
        assert tmux.wait_for("0 marked", WAIT_S), tmux.screen()
        tmux.keys("o")
        assert tmux.wait_for("Open a snapshot", WAIT_S), tmux.screen()
        tmux("send-keys", "-t", tmux.session, "-l", str(SNAPSHOT))
        tmux.keys("Enter")
        assert tmux.wait_for("hf:llama 1B", WAIT_S), tmux.screen()
        tmux.keys("Enter")  # the opened run becomes the current one
        assert tmux.wait_for("20/20 measured steps", WAIT_S), tmux.screen()  # Live's, not the Runs row's "20/20"
        tmux.keys("3")
        assert tmux.wait_for("nvjet_sm90", WAIT_S), tmux.screen()
        tmux.keys("/")
        tmux("send-keys", "-t", tmux.session, "-l", "bprop")
        # the filter applies as it is typed: on a loaded machine, keys sent before it has would open another kernel
        assert _wait_until(lambda: "nvjet_sm90" not in tmux.screen(), WAIT_S), tmux.screen()
        tmux.keys("Enter", "Down", "Enter")
        assert tmux.wait_for("could save", WAIT_S), tmux.screen()
        pages = _pages(tmux)
    finally:
        tmux("kill-server")
    text = "\n".join(pages)
    top = pages[0]
    # the console drew at the terminal's size, not at a size fixed elsewhere
    assert max(len(line) for line in top.splitlines()) == width and len(top.splitlines()) == height, top
    # the kernel, what it could save, and why, on the first screen
    assert "flash_bprop" in top and "9.078 ms/step" in top and "could save 4.411 ms/step" in top, top
    for words in ("39.6 % of the SMs' peak", "51.4 % of peak", "latency", "384.4 TFLOP/s bf16"):
        assert words in text, (words, text)
    assert "TheoreticalOccupancy" in text
    # the roofline: axes, the measured roofs, the marks, and the kernel shown among the listed points
    assert "FLOP/byte" in text and "roofs, the run's measured peaks" in text and "@" in text, text
    assert "#2 • 694.33 FLOP/byte, 384.41 TFLOP/s bf16" in " ".join(text.split()), text
    assert all(len(line) <= width for page in pages for line in page.splitlines())
    evidence = os.environ.get("PERFCONSOLE_EVIDENCE_DIR")
    if evidence:
        out = Path(evidence) / f"console_{width}x{height}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(f"--- page {i + 1} of {len(pages)} ---\n{p}\n" for i, p in enumerate(pages)))

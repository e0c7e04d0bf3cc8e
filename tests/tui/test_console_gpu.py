"""On the GPU machine: a small CUDA run with live NVML values, and every screen with real data.

    pytest -m gpu tests/tui/test_console_gpu.py -v
    PERFCONSOLE_SCREENSHOTS=/some/dir pytest -m gpu tests/tui/test_console_gpu.py   # keep the SVGs
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from console_helpers import make_app, plain, wait_for

from perfconsole.core.telemetry import nvml
from perfconsole.core.settings import RunSpec
from perfconsole.tui.messages import GpuSampled
from perfconsole.tui.widgets.sortable_table import SortableTable

pytestmark = [pytest.mark.gpu, pytest.mark.shares_gpu]  # what it checks are screens and records, no timing

SMALL = RunSpec(size="small", ctx=256, batch=4, device="cuda", precision="bf16", mode="train", warmup=3,
                steps=40, profile="torch")


def _shot(app, name: str) -> None:
    out = os.environ.get("PERFCONSOLE_SCREENSHOTS")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        app.save_screenshot(f"{name}.svg", path=out)


async def test_small_cuda_run_with_live_nvml_and_every_screen():
    assert nvml.gpu_count() > 0, "NVML sees no GPU on a machine with CUDA"
    app = make_app(SMALL, sampler=nvml.sample)
    seen: list = []
    async with app.run_test(size=(120, 34), message_hook=seen.append) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.active is not None and len(app.active.steps) >= 3, timeout=300)
        samples = [m.sample for m in seen if isinstance(m, GpuSampled) and m.sample is not None]
        assert samples, "no NVML sample arrived while the run streamed"
        s = samples[-1]
        assert s.mem_used_mib and s.mem_total_mib and s.mem_used_mib <= s.mem_total_mib
        gpu_text = plain(app.main("#gpu").content)
        assert s.name in gpu_text and "util" in gpu_text and "no GPU" not in gpu_text
        _shot(app, "live_running")
        await wait_for(pilot, lambda: app.session.runs[-1].finished, timeout=600)
        await pilot.pause(0.5)
        r = app.session.runs[-1]
        assert r.status == "ok", r.error
        assert r.summary.mfu is not None and 0 < r.summary.mfu < 1
        assert "MFU" in plain(app.main("#stats").content)
        _shot(app, "live_finished")
        await pilot.press("3")
        await pilot.pause()
        kernels = app.main("#kernel-table")
        assert isinstance(kernels, SortableTable) and kernels.shown
        assert {"matmul"} <= {row["category"] for row in kernels.shown}
        _shot(app, "kernels")
        await pilot.press("4")
        await pilot.pause()
        nvtx = app.main("#nvtx-table")
        ranges = [row["range"] for row in nvtx.shown]
        assert "forward" in ranges
        forward = nvtx.shown[ranges.index("forward")]
        assert forward["instances"] == 40  # one per measured step, not doubled by the CUDA annotation twin
        nvtx.move_cursor(row=ranges.index("forward"))
        await pilot.pause()
        assert app.main("#range-kernels").shown
        _shot(app, "nvtx")
        # A second run in fp32 to compare against.
        await pilot.press("1")
        app.main("#launch-pane").set_value("precision", "fp32")
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(app.session.runs) == 2 and app.session.runs[-1].finished, timeout=600)
        await pilot.press("5", "space", "down", "space", "c")
        await pilot.pause()
        text = plain(app.main("#compare-body", ).content)
        assert "precision" in text and "Kernel time by category" in text
        _shot(app, "compare")
        await pilot.press("5")
        await pilot.pause()
        _shot(app, "runs")

"""The console's data-parallel parts: the launch form's job fields, the Live pane's ranks, every GPU."""
from __future__ import annotations

import time
from pathlib import Path

from console_helpers import make_app, plain, screen_lines, wait_for
from textual.widgets import Static

from perfconsole.core import store
from perfconsole.core.telemetry.nvml import GpuSample
from perfconsole.tui.panes.launch import LaunchPane, spec_from_form
from perfconsole.tui.panes.live import LivePane
from perfconsole.tui.widgets.gpu_panel import GpuPanel

JOB = Path(__file__).resolve().parents[1] / "fixtures" / "parallel" / "ddp2_tiny_cpu.json"


async def test_form_takes_a_job_and_says_what_is_wrong():
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        pane = app.query_one(LaunchPane)
        pane.set_value("nproc", "2")
        await pilot.pause()
        assert pane.spec is None and "ddp or fsdp" in pane.errors["parallel"]
        pane.set_value("parallel", "ddp")
        pane.set_value("bucket_mb", "50")
        pane.set_value("comm_hook", "bf16")
        await pilot.pause()
        assert pane.spec is not None
        assert (pane.spec.nproc, pane.spec.parallel, pane.spec.bucket_mb, pane.spec.comm_hook) == (2, "ddp", 50.0, "bf16")
        pane.set_value("bucket_mb", "lots")
        await pilot.pause()
        assert pane.spec is None and "number" in pane.errors["bucket_mb"]
        pane.set_value("bucket_mb", "")
        pane.set_value("reshard", False)                    # an FSDP setting, on a DDP job
        await pilot.pause()
        assert pane.spec is None and "needs parallel fsdp" in pane.errors["reshard"]
        pane.set_value("comm_hook", "none")
        pane.set_value("parallel", "fsdp")
        await pilot.pause()
        assert pane.spec is not None and (pane.spec.parallel, pane.spec.reshard) == ("fsdp", False)
        pane.set_value("fsdp_bf16", True)                   # bf16 collectives need bf16 compute
        await pilot.pause()
        assert pane.spec is None and "needs precision bf16" in pane.errors["fsdp_bf16"]
        pane.set_value("precision", "bf16")
        await pilot.pause()
        assert pane.spec is not None and pane.spec.fsdp_bf16
        pane.set_value("fsdp_bf16", False)
        pane.set_value("parallel", "ddp")
        pane.set_value("reshard", True)
        pane.set_value("optimize_ddp", "no_optimization")    # how compile treats DDP: needs compile
        await pilot.pause()
        assert pane.spec is None and "without compile" in pane.errors["optimize_ddp"]
        pane.set_value("compile", True)
        await pilot.pause()
        assert pane.spec is not None and pane.spec.optimize_ddp == "no_optimization"


def test_an_empty_bucket_size_keeps_the_library_default():
    spec, errors = spec_from_form({"nproc": "2", "parallel": "ddp", "bucket_mb": " "}, make_app().prefill)
    assert not errors and spec.bucket_mb is None


async def test_live_shows_every_rank_of_a_real_job():
    record = store.load(JOB)
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        live = app.main(LivePane)
        live.show_record(record)
        await pilot.pause()
        box = app.main("#live-ranks")
        assert box.display
        text = plain(box.content)
        assert "ddp over 2 processes" in text and "weak-scaling efficiency" in text
        assert "collectives alone" in text and "bus bandwidth" in text and "the link" in text
        assert "rank 0: median" in text and "rank 1: median" in text
        slowest = record.summary.slowest_rank
        for rank, n in slowest.items():
            assert f"rank {rank}: " in text and f"slowest in {n}" in text


def test_gpu_panel_gives_each_other_gpu_a_line():
    def sample(i: int, util: float) -> GpuSample:
        return GpuSample(i, "NVIDIA H200", time.monotonic(), util, 1000.0 * (i + 1), 143771.0, 500.0, 40.0, 1980.0)

    panel = GpuPanel()
    panel.sample, panel.history, panel.others = sample(0, 90), (sample(0, 90),), (sample(1, 97), sample(2, 12))
    text = plain(panel.panel(60, 9))
    assert text.splitlines()[0].startswith("GPU 0: NVIDIA H200")
    assert "GPU 1 util 97% mem 2,000 MiB 500 W" in text and "GPU 2 util 12%" in text


async def test_at_80x24_every_part_of_a_jobs_live_pane_is_reachable():
    record = store.load(JOB)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        live = app.main(LivePane)
        live.show_record(record)
        await wait_for(pilot, lambda: "no GPU" in plain(app.main("#gpu").content))
        await pilot.press("home")
        await pilot.pause()
        top = "\n".join(screen_lines(app))
        assert "rank 0: median" in top and "rank 1: median" in top     # every rank's line, not the first only
        assert "comm - ms" not in top        # no per-rank comm timed: said nowhere rather than as a dash pair
        assert live.max_scroll_y > 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert live.scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        bottom = "\n".join(screen_lines(app))
        assert live.scroll_y == live.max_scroll_y
        assert "total ms" in bottom and "no GPU" in bottom and "peak mem" in bottom   # step table, GPU panel
        table = app.main("#steps")
        assert table.cursor_row == table.row_count - 1                                # End: the last step too
        await pilot.press("home")
        await pilot.pause()
        assert live.scroll_y == 0 and table.cursor_row == 0


async def test_at_80_columns_a_long_field_error_wraps_whole_under_its_field():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LaunchPane)
        for name, value in (("nproc", "2"), ("parallel", "ddp"), ("bucket_mb", "99999999")):
            pane.set_value(name, value)
        await pilot.pause()
        err = app.query_one("#err-bucket_mb", Static)
        message = pane.errors["bucket_mb"]
        assert "65536" in message and len(message) > err.size.width   # longer than the column: it wraps
        err.scroll_visible(animate=False)
        await pilot.pause()
        assert err.size.height >= 2
        shown = " ".join(line[36:].strip() for line in screen_lines(app))   # the error column, line after line
        assert message in shown, shown

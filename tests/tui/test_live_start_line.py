"""The Live pane's start line in an 80-column terminal: where the whole line does not fit, the start's total and
its longest phases come first, so the compile and its cache verdict stay on screen. The phases are the fp8 ladder
cell's second run on an H200 (docs/results/gpu_loop_ladder_rerun_h200.md, ladder_run2.json.gz, its fifth record),
whose whole line is 215 characters: cut at 80, it showed the imports and the zero-second phases and lost the rest."""
from __future__ import annotations

from console_helpers import make_app, plain, shipped
from textual.widgets import Static

from perfconsole.core import store
from perfconsole.core.reports.run import start_line, start_text

FP8_RERUN = {"imports": 2.2414, "peaks": 0.0007, "build": 0.2846, "flops": 0.0014, "weights": 0.0144,
             "kernels": 2.5986, "fp8": 0.3091, "compile": 50.9587, "first step": 1.1318, "rest of warm-up": 1.106}
VERDICT = "hit; AOTAutograd 0 hit, 0 miss, 1 bypass"


def test_a_line_that_fits_is_the_whole_line_and_one_that_does_not_leads_with_what_took_longest():
    whole = start_text(FP8_RERUN, VERDICT)
    assert len(whole) == 215
    assert start_line(FP8_RERUN, VERDICT, len(whole)) == whole
    short = start_line(FP8_RERUN, VERDICT, 80)
    assert short.startswith(f"start 58.6 s: compile 51.0 s (cache {VERDICT}) · kernels 2.6 s · imports 2.2 s")
    assert "peaks" not in short and "flops" not in short and "weights" not in short  # under 0.05 s
    assert short.endswith("fp8 0.3 s · build 0.3 s")


async def test_an_80_column_console_shows_the_compile_and_its_verdict():
    app = make_app()
    record = store.load(shipped("tiny-cpu-train-fp32.json"))
    record.start, record.compile_cache = dict(FP8_RERUN), VERDICT
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.live_pane.show_record(record)  # as a run picked in Runs: shown while the Live pane is hidden
        await pilot.press("2")
        await pilot.pause()
        second = plain(app.query_one("#live-status", Static).content).splitlines()[1]
        assert second.startswith("start 58.6 s: compile 51.0 s (cache hit; AOTAutograd"), second
        assert second.endswith("…") and len(second) <= 80


async def test_the_live_pane_flags_a_run_whose_host_took_its_cpu():
    app = make_app()
    record = store.load(shipped("tiny-cpu-train-fp32.json"))
    record.host = [{"pid": 2, "wall_s": 4.25, "thread_cpu_s": 2.11, "involuntary_switches": 528, "steal_share": 0.0,
                    "cpu_steal_share": 0.0, "cpus": [1, 1], "allowed_cpus": 2}]
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("2")
        app.live_pane.show_record(record)
        await pilot.pause()
        status = plain(app.query_one("#live-status", Static).content)
        assert "host: the issuing thread was on a CPU 49.6 % of the measured steps' wall, preempted 528" in status

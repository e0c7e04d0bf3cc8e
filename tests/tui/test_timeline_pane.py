"""The Timeline pane on a real H200 trace (llama 1B, CUDA graphs, 3 steps): reached by its tab key and from Runs,
its keys (zoom, pan, next kernel, next gap, fit a step, go to step N) and Enter into the Kernels pane."""
from __future__ import annotations

import gzip
from pathlib import Path

from console_helpers import make_app, screen_lines, shipped, wait_for

from perfconsole.core import store
from perfconsole.core.profiling.torch_trace import parse_torch_trace
from perfconsole.core.record import Profile

TRACE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_traces" / "h200_llama1B_bf16w_cudagraphs_3steps.json.gz"


def trace_record():
    """A run whose profile is the H200 trace: its tables as the worker builds them, the trace as its file."""
    tables, _ = parse_torch_trace(gzip.open(TRACE, "rt").read(), TRACE.name)
    r = store.load(shipped("tiny-cpu-train-fp32.json"))
    r.id, r.name = "h200-trace", "llama 1B bf16w cudagraphs (H200)"
    r.profile = Profile("torch", [str(TRACE)], tables)
    return r


async def _open(pilot):
    pane = pilot.app.query_one("#timeline-pane")
    r = trace_record()
    pilot.app.query_one("#kernels-pane").show_record(r)   # as viewing a run shows it in every pane
    pane.show_record(r)
    await pilot.press("8")
    await wait_for(pilot, lambda: pane.view is not None, timeout=60)
    return pane


async def test_tab_8_draws_the_streams_and_ranges_and_keys_move_the_window():
    async with make_app().run_test(size=(120, 40)) as pilot:
        pane = await _open(pilot)
        text = "\n".join(screen_lines(pilot.app))
        assert "8 Timeline" in text and "gpu0 s7" in text and "gpu0 ranges" in text
        v = pane.view
        whole = v.t1 - v.t0
        await pilot.press("plus")
        assert v.t1 - v.t0 == whole // 2 or abs((v.t1 - v.t0) - whole / 2) <= 1
        await pilot.press("minus")
        n = v.tl.step_at((v.t0 + v.t1) // 2).index   # f fits the step around the window's middle
        await pilot.press("f")
        assert v.step == n and (v.t0, v.t1) == (v.tl.step(n).start, v.tl.step(n).end)
        assert f"step {n} of 3" in "\n".join(screen_lines(pilot.app))
        t0 = v.t0
        await pilot.press("right")
        assert v.t0 > t0
        await pilot.press("n")
        k = v.kernel
        assert k is not None and k.name[:30] in "\n".join(screen_lines(pilot.app))
        await pilot.press("n")
        assert v.kernel.start > k.start
        await pilot.press("N")
        assert v.kernel.start == k.start
        await pilot.press("g")
        assert v.gap is not None and v.gap[1] - v.gap[0] >= 10_000
        assert "idle gap" in "\n".join(screen_lines(pilot.app))


async def test_s_goes_to_the_step_typed():
    async with make_app().run_test(size=(80, 24)) as pilot:
        pane = await _open(pilot)
        await pilot.press("s", "3", "enter")
        v = pane.view
        assert v.step == 3 and (v.t0, v.t1) == (v.tl.step(3).start, v.tl.step(3).end)
        await pilot.press("s", "9", "enter")
        assert v.step == 3   # no step 9: said, and the window stays


async def test_enter_on_a_kernel_opens_the_kernels_pane_filtered_to_it():
    async with make_app().run_test(size=(120, 40)) as pilot:
        pane = await _open(pilot)
        await pilot.press("f", "n", "enter")
        name = pane.view.kernel.name
        assert pilot.app.tabs.active == "kernels"
        assert pilot.app.query_one("#kernel-filter").value == name
        table = pilot.app.query_one("#kernel-table")
        await wait_for(pilot, lambda: len(table.shown) >= 1, timeout=30)
        assert {r["name"] for r in table.shown} == {name}


async def test_t_in_runs_opens_a_runs_timeline_and_a_run_without_a_trace_says_why(tmp_path):
    r = trace_record()
    store.save(r, tmp_path / "h200.json")
    async with make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), tmp_path / "h200.json"]).run_test(
            size=(120, 40)) as pilot:
        app = pilot.app
        await pilot.press("5")
        runs = app.query_one("#runs-pane")
        table = app.query_one("#runs-table")
        table.move_cursor(row=runs.ids.index(r.id))
        await pilot.press("t")
        await wait_for(pilot, lambda: app.tabs.active == "timeline", timeout=10)
        pane = app.query_one("#timeline-pane")
        await wait_for(pilot, lambda: pane.view is not None, timeout=60)
        await pilot.press("5")
        table.move_cursor(row=0)
        await pilot.press("t")
        await wait_for(pilot, lambda: "no profile" in pane.message, timeout=30)
        assert "no profile" in "\n".join(screen_lines(app))

"""The console drives real runs: the tiny model on CPU through the real worker process."""
from __future__ import annotations

import os

import psutil
import pytest
from console_helpers import TINY, make_app, plain, wait_for
from helpers import gone_or_zombie
from textual.widgets import Button, Static

from perfconsole.core.launch.interleave import InterleavedRuns
from perfconsole.core.reports.run import start_line, start_text
from perfconsole.tui.messages import RunEnded, RunUpdated
from perfconsole.tui.screens.dialogs import ConfirmScreen
from perfconsole.tui.panes.launch import LaunchPane


def _text(app, selector: str) -> str:
    return plain(app.query_one(selector, Static).content)


@pytest.mark.e2e
async def test_tiny_cpu_run_from_launch_to_finished_stats():
    app = make_app()
    seen: list = []
    async with app.run_test(size=(100, 34), message_hook=seen.append) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].finished)
        await pilot.pause()
        r = app.session.runs[-1]
        assert r.status == "ok", r.error
        assert len(r.warmup_steps) == 1 and len(r.steps) == 3
        assert app.query_one("#tabs").active == "live"
        status = _text(app, "#live-status")
        assert status.startswith("finished") and "3/3 measured steps" in status
        # where the start went: the status's second line, whole or cut to the pane's width
        width = app.query_one("#live-status", Static).size.width
        lines = status.splitlines()
        whole, second = start_line(r.start, r.compile_cache, width), lines[-1]
        # the start line last; between them only the host's flag, where a busy machine took the CPU from the run
        assert len(lines) == 2 or (len(lines) == 3 and lines[1].startswith("host: the issuing thread")), lines
        assert second.startswith("start: imports " if whole == start_text(r.start) else "start ")
        assert second == whole or (second.endswith("…") and whole.startswith(second[:-1]))
        stats = _text(app, "#stats")
        assert f"{r.summary.total_ms.mean:,.3f} ms" in stats and "tokens/s" in stats
        assert app.query_one("#steps").row_count == 4
        assert "no GPU" in _text(app, "#gpu")
    updates = [m for m in seen if isinstance(m, RunUpdated)]
    assert updates and all(m.run_id == r.id for m in updates)
    assert [m.run_id for m in seen if isinstance(m, RunEnded)] == [r.id]


@pytest.mark.e2e
async def test_cancel_mid_run_keeps_measured_steps_and_ends_the_worker():
    app = make_app(TINY.with_(steps=200), launch_env={"PERFCONSOLE_FAULT": "slow:150"})
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.active is not None and len(app.active.steps) >= 2)
        pid = app.launch.pid
        await pilot.press("x")
        await wait_for(pilot, lambda: app.session.runs[-1].finished, timeout=30)
        await pilot.pause()
        r = app.session.runs[-1]
        assert r.status == "cancelled"
        assert 2 <= len(r.steps) < 200
        assert r.summary is not None and r.summary.total_ms.n == len(r.steps)
        status = _text(app, "#live-status")
        assert status.startswith("CANCELLED")
        # x is the user's: said so, not "(a signal, or the user)"
        assert "cancelled: stopped by the user before its last step" in status and "signal" not in status, status
        assert r.error.message == "stopped by the user before its last step"
        assert gone_or_zombie(pid)


@pytest.mark.e2e
async def test_injected_oom_is_shown_as_oom():
    app = make_app(TINY.with_(steps=6), launch_env={"PERFCONSOLE_FAULT": "oom:3"})
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].finished)
        await pilot.pause()
        r = app.session.runs[-1]
        assert r.status == "oom" and r.error.kind == "oom"
        assert len(r.steps) == 2  # global steps 1 and 2 measured before step 3 ran out of memory
        status = _text(app, "#live-status")
        assert "OUT OF MEMORY" in status and "oom: CUDA out of memory" in status


async def test_invalid_form_values_are_marked_and_block_the_run():
    app = make_app()
    async with app.run_test(size=(100, 34)) as pilot:
        pane = app.query_one(LaunchPane)
        pane.set_value("ctx", "0")
        await pilot.pause()
        assert "must be from 1 to" in _text(app, "#err-ctx")
        assert app.query_one("#f-ctx").has_class("-invalid")
        assert app.query_one("#btn-run", Button).disabled
        pane.set_value("ctx", "abc")
        pane.set_value("steps", "x")
        await pilot.pause()
        assert "must be an integer" in _text(app, "#err-ctx") and "must be an integer" in _text(app, "#err-steps")
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.session.runs == []
        pane.set_value("ctx", "32")
        pane.set_value("steps", "3")
        pane.set_value("size", "custom")
        await pilot.pause()
        assert app.query_one("#f-d_model").display
        assert "must be an integer" in _text(app, "#err-d_model")
        pane.set_value("size", "tiny")
        await pilot.pause()
        profilers = app.query_one("#f-profile").options
        assert "nsys" not in profilers                        # the CPU has no nsys to offer
        pane.set_value("device", "cuda")
        await pilot.pause()
        pane.set_value("profile", "nsys")
        pane.set_value("device", "cpu")                       # chosen for a GPU, kept on the CPU with its reason
        await pilot.pause()
        assert "nsys needs device cuda" in _text(app, "#err-profile")
        pane.set_value("profile", "none")
        await pilot.pause()
        assert not app.query_one("#btn-run", Button).disabled and pane.spec == TINY


@pytest.mark.e2e
async def test_quit_mid_run_asks_once_then_ends_the_worker():
    app = make_app(TINY.with_(steps=200), launch_env={"PERFCONSOLE_FAULT": "slow:150"})
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.active is not None and app.launch.pid is not None
                       and len(app.active.steps) >= 1)
        pid = app.launch.pid
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.return_code is not None)  # it waits for the run's last events, saves, exits
    assert app.return_code == 0
    psutil.wait_procs([psutil.Process(pid)] if psutil.pid_exists(pid) else [], timeout=5)
    assert gone_or_zombie(pid)


@pytest.mark.e2e
@pytest.mark.slow
async def test_queue_runs_fp32_bf16_fp16_one_after_another(monkeypatch):
    # 1.5 s a step (three a run): a run forked from a warm process has no imports to wait for, and on a loaded
    # machine a shorter fp32 was over between two reads of the console (CI, at 300 ms a step).
    monkeypatch.setenv("PERFCONSOLE_FAULT", "slow:1500")
    app = make_app(TINY.with_(steps=2, mode="fwd"))
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+t")
        # fp32 runs; Live and Runs say what waits behind it.
        waiting = "2 queued: tiny ctx32 b2 bf16 fwd, tiny ctx32 b2 fp16 fwd"
        await wait_for(pilot, lambda: app.session.runs)  # ctrl+t queued three and started the first
        assert app.active is app.session.runs[0] and app.active.spec.precision == "fp32" and not app.active.finished, \
            [(r.spec.precision, r.status) for r in app.session.runs]
        assert waiting in _text(app, "#live-queue") and app.query_one("#live-queue").display
        assert waiting in _text(app, "#runs-queue")
        await wait_for(pilot, lambda: len(app.session.runs) == 3 and all(r.finished for r in app.session.runs), timeout=180)
        assert not app.query_one("#live-queue").display and not app.query_one("#runs-queue").display
        assert [r.spec.precision for r in app.session.runs] == ["fp32", "bf16", "fp16"]
        starts = [app.times[r.id] for r in app.session.runs]
        assert all(a[1] <= b[0] for a, b in zip(starts, starts[1:]))  # never two at once
        assert {r.status for r in app.session.runs[:2]} == {"ok"}
        assert app.session.runs[2].status in ("ok", "error")  # fp16 autocast on CPU depends on the torch build


@pytest.mark.e2e
@pytest.mark.slow
async def test_queued_precisions_with_several_processes_run_in_rounds():
    app = make_app(TINY.with_(steps=2, mode="fwd", repeat=2))
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.launch is not None)
        runner = app.launch
        assert isinstance(runner, InterleavedRuns) and app.queue.pending() == []
        await wait_for(pilot, lambda: len(app.session.runs) == 3 and all(r.finished for r in app.session.runs), timeout=240)
        await wait_for(pilot, lambda: app.launch is None)
        assert [r.spec.precision for r in app.session.runs] == ["fp32", "bf16", "fp16"]
        fp16_ok = app.session.runs[2].status == "ok"  # fp16 autocast on CPU depends on the torch build
        assert runner.order == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1)] + ([(2, 1)] if fp16_ok else [])
        for r in app.session.runs[:2]:
            assert r.status == "ok" and len(r.replicates) == 2
            assert r.summary.between_processes is not None


def test_first_frame_does_not_import_torch():
    import subprocess
    import sys

    code = ("import asyncio, sys\n"
            "from perfconsole.tui.app import PerfConsole\n"
            "async def main():\n"
            "    app = PerfConsole(sampler=lambda i: None)\n"
            "    async with app.run_test() as pilot:\n"
            "        await pilot.pause()\n"
            "        assert app.first_frame_at is not None\n"
            "asyncio.run(main())\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.e2e
async def test_processes_field_runs_replicates_and_live_says_which_process():
    app = make_app()
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        app.query_one(LaunchPane).set_value("repeat", 2)
        await pilot.pause()
        assert app.query_one(LaunchPane).spec.repeat == 2
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].finished)
        await pilot.pause()
        r = app.session.runs[-1]
        assert r.status == "ok" and [x.status for x in r.replicates] == ["ok", "ok"]
        assert len(r.steps) == 6 and r.summary.between_processes["total_ms"].n == 2
        assert "6 measured steps in 2/2 processes" in _text(app, "#live-status")
        app.query_one(LaunchPane).set_value("repeat", 0)
        await pilot.pause()
        assert "must be from 1 to 100, not 0" in _text(app, "#err-repeat")


@pytest.mark.e2e
async def test_live_keeps_every_phase_in_view_at_80_columns_and_offers_cancel_only_while_running():
    app = make_app(TINY.with_(steps=40), launch_env={"PERFCONSOLE_FAULT": "slow:50"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].steps)
        assert app.check_action("cancel_run", ()) is True
        await pilot.press("x")
        await wait_for(pilot, lambda: app.session.runs[-1].finished)
        await pilot.pause()
        assert app.check_action("cancel_run", ()) is False
        table = app.query_one("#steps")
        assert [str(c.label) for c in table.columns.values()] == ["step", "total ms", "fwd ms", "bwd ms", "opt ms"]
        assert table.virtual_size.width <= table.size.width        # no column scrolled out of view
        assert plain(table.get_row_at(0)[0]).strip() == "w0"
        await pilot.press("5")
        await pilot.pause()
        assert _text(app, "#runs-title").startswith("1 run, 0 marked")

"""The console keeps one warm process for its life (core.launch.warm): its runs are forked from it, a
failed run leaves it serving the next, and it is gone, with its pointer file, once the console has ended."""
from __future__ import annotations

import subprocess

import psutil
import pytest
from console_helpers import TINY, make_app, wait_for
from textual.widgets import Button

from perfconsole.core.launch import warm

pytestmark = pytest.mark.e2e


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_the_consoles_runs_fork_from_its_warm_process_which_ends_with_it():
    app = make_app(TINY, launch_env=None)
    app.warm_start = True
    async with app.run_test(size=(100, 34)) as pilot:
        own = warm._own
        assert own is not None and own.proc.poll() is None
        server, pointer = own.proc.pid, own.pointer
        app.main("#btn-run").focus()
        await pilot.pause()
        await pilot.press("enter")  # Enter on the launch form's Run
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].finished, timeout=180)
        first = app.session.runs[-1]
        assert first.status == "ok" and first.environment["start"] == "warm", first.error
        assert pointer.exists() and int(pointer.name) > 0
        # A run that dies mid-way (the fault is the app's launch env) and the warm process serves the next.
        # A record is finished as its last event is folded in; the console lets the run go a moment later (RunEnded):
        # Run before that says a run is in progress and starts nothing (the clean-clone CI of c5f59ff timed out so).
        await wait_for(pilot, lambda: app.launch is None)
        app.launch_env = {"PERFCONSOLE_FAULT": "exit:1"}
        app.enqueue([TINY], queue=False)  # as the form's Run does (the live tab has the keys now)
        await wait_for(pilot, lambda: len(app.session.runs) == 2 and app.session.runs[-1].finished and app.launch is None, timeout=180)
        assert app.session.runs[-1].status == "error" and app.session.runs[-1].environment["start"] == "warm"
        app.launch_env = None
        app.enqueue([TINY], queue=False)
        await wait_for(pilot, lambda: len(app.session.runs) == 3 and app.session.runs[-1].finished, timeout=180)
        assert app.session.runs[-1].status == "ok" and app.session.runs[-1].environment["start"] == "warm"
        assert warm._own is own and own.proc.pid == server
        assert isinstance(app.main("#btn-run"), Button)
    assert warm._own is None and _gone(server) and not pointer.exists()


async def test_a_console_of_tests_starts_no_warm_process(monkeypatch):
    """Only the real console (tui/main.py) keeps one: an app under test starts none unless asked."""
    monkeypatch.setattr(warm, "_own", None)  # set aside the one this xdist worker's e2e tests launch from (conftest)
    app = make_app(TINY)
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        assert warm._own is None


async def test_a_console_ending_its_runs_leaves_a_warm_process_it_does_not_own():
    """Ending a console's runs kills their processes, not a warm process the console did not start (here the
    xdist worker's, which its e2e tests launch from): only the console that started one stops it."""
    own = warm.start_own()
    assert own is not None and own.wait_ready() is None
    app = make_app(TINY, launch_env=None)
    async with app.run_test(size=(100, 34)) as pilot:
        app.enqueue([TINY], queue=False)
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].finished, timeout=180)
        assert app.session.runs[-1].status == "ok" and app.session.runs[-1].environment["start"] == "warm", app.session.runs[-1].error
    with pytest.raises(subprocess.TimeoutExpired):  # a SIGKILL would have ended it within this
        own.proc.wait(timeout=2)
    assert warm._own is own

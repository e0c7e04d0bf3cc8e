"""Quitting keeps what was measured: `q` (and ctrl+q, the palette's Quit) takes the path a stop signal or a
lost terminal takes, so every finished or cancelled run of the session that was not saved is in the data
folder when the console exits, and the next console lists it in Runs. A run already saved is not written
again."""
from __future__ import annotations

import pytest

from perfconsole.core import store
from perfconsole.core.paths import data_dir

from console_helpers import TINY, make_app, wait_for

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)

FAST = TINY.with_(mode="fwd", warmup=0, steps=2)


def _snapshots():
    return sorted((data_dir() / "snapshots").glob("*.json"))


async def _run_one(app, pilot) -> None:
    before = len(app.session.runs)
    app.enqueue([FAST], queue=False)
    await wait_for(pilot, lambda: len(app.session.runs) > before and app.session.runs[-1].finished and app.launch is None,
                   timeout=180)


@pytest.mark.parametrize("key", ["q", "ctrl+q"])
async def test_quitting_keeps_the_runs_not_saved_and_the_next_console_lists_them(key):
    app = make_app(FAST)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await _run_one(app, pilot)
        await pilot.press("5", "s")                   # the first run saved by hand
        await wait_for(pilot, lambda: len(_snapshots()) == 1)
        saved = _snapshots()[0]
        stamp = saved.stat().st_mtime_ns
        await _run_one(app, pilot)
        await _run_one(app, pilot)
        await pilot.press(key)
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    ids = {r.id for r in app.session.runs}
    assert {store.load(p).id for p in _snapshots()} == ids and len(_snapshots()) == 3
    assert saved.stat().st_mtime_ns == stamp          # saved once, not written again on the way out
    assert len(app.kept) == 2 and all(p.parent == data_dir() / "snapshots" for p in app.kept)

    again = make_app(FAST)
    async with again.run_test(size=(120, 34)) as pilot:
        await wait_for(pilot, lambda: len(again.session.runs) == 3)
        assert {r.id for r in again.session.runs} == ids
        assert all(r.status == "ok" and len(r.steps) == 2 for r in again.session.runs)
        await pilot.press("5", "q")
        await wait_for(pilot, lambda: again.return_code is not None)
    assert len(_snapshots()) == 3 and again.kept == []  # runs opened from files are not written again


async def test_quitting_mid_run_keeps_the_cancelled_run_with_its_steps():
    app = make_app(TINY.with_(steps=200), launch_env={"PERFCONSOLE_FAULT": "slow:150"})
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.active is not None and len(app.active.steps) >= 2)
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0
    [path] = _snapshots()
    kept = store.load(path)
    assert kept.status == "cancelled" and len(kept.steps) >= 2 and app.kept == [path]

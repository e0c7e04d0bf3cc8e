"""A run's events that reach the console as it closes (its thread posts them while the app unmounts) still go into
the run's record, and draw nothing: there is no screen left to draw on. Seen in CI as an IndexError in the console's
message loop, from a RunUpdated handled after the last screen was gone."""
from __future__ import annotations

from console_helpers import TINY, make_app

from perfconsole.core import events as ev
from perfconsole.core.record import RunRecord
from perfconsole.tui.messages import RunEnded, RunFeed, RunUpdated
from perfconsole.tui.screens.console_screen import ConsoleScreen


async def test_a_runs_last_events_after_the_console_closed_fill_its_record_and_draw_nothing():
    app = make_app(TINY)
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        record = RunRecord(TINY)
        app.session.add(record)
        app.active = record
        app.session.show(record)
    assert not app.screen_stack  # closed
    for event in (ev.Error("cancelled", "ended with the console"), ev.Finished("cancelled")):
        feed = app.feeds[record.id] = RunFeed()
        feed.push(event)
        app.on_run_updated(RunUpdated(record.id))
    assert record.status == "cancelled" and record.error.message == "ended with the console"
    app.on_run_ended(RunEnded(record.id))
    assert record.id not in app.feeds


async def test_a_runs_event_while_the_console_s_panes_are_gone_and_its_screen_not_yet_draws_nothing(monkeypatch):
    """The window CI met (tests/tui/test_form_keys.py): the console is shutting down, its main screen still on the
    stack but its panes already removed, and a run's thread posts a status change (NoMatches: 'RunsPane')."""
    app = make_app(TINY)
    record = RunRecord(TINY)
    drawn: list = []

    def late_event(screen) -> None:  # the screen's own unmount: its children are gone, it is still on the stack
        assert app.screen_stack and not screen.query("RunsPane")
        feed = app.feeds[record.id] = RunFeed()
        feed.push(ev.Finished("cancelled"))
        drawn.append(app.on_run_updated(RunUpdated(record.id)))

    monkeypatch.setattr(ConsoleScreen, "on_unmount", late_event, raising=False)
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        app.session.add(record)
        app.active = record
        app.session.show(record)
    assert drawn == [None] and record.status == "cancelled"  # the record took the event; nothing was drawn

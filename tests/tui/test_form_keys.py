"""Keys in the console's text fields: every key counts, in the order typed; the console's keys still work."""
from __future__ import annotations

import pytest
from console_helpers import make_app, wait_for
from textual import events
from textual.widgets import Input

from perfconsole.tui.panes.launch import LaunchPane, LaunchRequested


async def _burst(app, pilot, keys) -> None:
    """Keys as a terminal delivers a burst: all queued before the first is handled (pilot.press waits)."""
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else {"slash": "/"}.get(key)))
    for _ in range(6):
        await pilot.pause()


async def test_a_burst_of_edits_lands_in_order():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        ctx = app.query_one("#f-ctx", Input)
        ctx.focus()
        await pilot.pause()
        await _burst(app, pilot, ["end", "backspace", "backspace", "backspace", "1", "2", "8"])
        assert ctx.value == "128"
        await _burst(app, pilot, ["backspace", "6"])          # valid -> valid, the case that lost both keys
        assert ctx.value == "126"
        await _burst(app, pilot, ["home", "delete", "9"])
        assert ctx.value == "926"
        assert app.query_one(LaunchPane).spec.ctx == 926


@pytest.mark.e2e
async def test_console_keys_work_from_a_field_and_esc_leaves_it():
    app = make_app()
    seen: list = []
    async with app.run_test(size=(80, 24), message_hook=seen.append) as pilot:
        app.query_one("#f-ctx", Input).focus()
        await pilot.pause()
        await pilot.press("ctrl+k")                           # cancel: nothing runs, and it says so
        await pilot.pause()
        assert app.query_one("#f-ctx", Input).value == "32"   # not "kill to end of line"
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.focused, Input)
        await pilot.press("2")
        await pilot.pause()
        assert app.query_one("#tabs").active == "live"
        await pilot.press("1")
        await pilot.pause()
        app.query_one("#f-batch", Input).focus()
        await pilot.pause()
        await pilot.press("ctrl+e")                           # queue the run, not "end of line"
        await pilot.pause()
        assert any(isinstance(m, LaunchRequested) and m.queue for m in seen)


async def test_the_focused_field_stands_out_and_an_open_dropdown_is_framed():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        ctx, batch = app.query_one("#f-ctx", Input), app.query_one("#f-batch", Input)
        ctx.focus()
        await pilot.pause()
        assert ctx.styles.background != batch.styles.background
        size = app.query_one("#f-size")
        size.focus()
        await pilot.press("enter")
        await pilot.pause()
        overlay = app.query_one("ChoiceList")
        assert overlay.display and overlay.styles.border_top[0] == "round"


async def test_ctrl_c_says_how_to_quit_from_anywhere():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one("#f-ctx", Input).focus()
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["q or ctrl+q quits"]
        assert app.is_running


async def test_every_editing_key_of_a_field_lands_in_order_in_a_burst():
    """ctrl+u, ctrl+w, the word moves and the rest run in key order too: "4", ctrl+u, "2" is 2, not 42."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        batch = app.query_one("#f-batch", Input)
        batch.focus()
        await pilot.pause()
        await _burst(app, pilot, ["end", "4", "ctrl+u", "2"])
        assert batch.value == "2"
        assert app.query_one(LaunchPane).spec.batch == 2
        args = app.query_one("#f-model_args", Input)
        args.focus()
        await pilot.pause()
        await _burst(app, pilot, [*"ab cd", "ctrl+w", *"ef"])             # delete_left_word
        assert args.value == "ab ef"
        await _burst(app, pilot, ["ctrl+left", "x", "ctrl+right", "y"])   # word moves
        assert args.value == "ab xefy"
        await _burst(app, pilot, ["home", "ctrl+backspace", "z"])         # delete_right_word
        assert args.value == "zxefy"
        await _burst(app, pilot, ["ctrl+a", "q", "ctrl+u", "r"])          # home, delete_left_all
        assert args.value == "rzxefy"
        await _burst(app, pilot, ["home", "shift+end", "s"])              # select to the end, typed over
        assert args.value == "s"


async def test_help_lists_the_keys_of_fields_tables_and_dialogs_too():
    from console_helpers import plain
    from textual.widgets import Static
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("5", "question_mark")
        await pilot.pause()
        rows = {" ".join(line.split()) for s in app.screen.query(Static) for line in plain(s.content).splitlines()}
        for row in ("Esc Leave field", "Home First row", "End Last row", "F1 Markdown", "F2 CSV", "F3 JSON",
                    "F4 SVG timeline", "y Yes", "n, Esc No", "PgUp, PgDn Page up, down", "Home, End Top, bottom"):
            assert row in rows, row


async def test_a_filter_typed_in_a_burst_right_after_slash_goes_to_the_filter():
    """`/` then a name in one burst (tmux send-keys, a fast typist over SSH): every key after `/` is the filter's,
    none reaches the table behind it (where `b` would hide the bars); a `/` typed inside the filter is text."""
    from console_helpers import fixture_profile_record

    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        record = fixture_profile_record()
        app.session.add(record)
        app.session.show(record)
        app.show_current()
        await pilot.pause()
        await pilot.press("3")
        await _burst(app, pilot, ["slash", *"bprop"])   # the tab's own second focus, once shown, took the filter's
        assert app.query_one("#kernel-filter", Input).value == "bprop"
        assert app.query_one("#kernel-bars").display
        await _burst(app, pilot, ["slash", "x"])
        assert app.query_one("#kernel-filter", Input).value == "bprop/x"
        await pilot.press("escape", "4")
        await _burst(app, pilot, ["slash", *"fwd"])
        assert app.query_one("#nvtx-filter", Input).value == "fwd"


async def test_a_digit_typed_in_an_open_choice_list_searches_it_and_keeps_the_pane():
    from textual.widgets import TabbedContent

    from perfconsole.tui.widgets.choice_field import ChoiceField

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        size = app.query_one("#f-size", ChoiceField)
        size.focus()
        await pilot.press("enter")          # the list opens
        await pilot.pause()
        assert size.expanded
        await _burst(app, pilot, ["2"])      # "2.7B": the list's own type-to-search, not pane 2
        assert app.query_one(TabbedContent).active == "launch"
        await pilot.press("enter")
        await pilot.pause()
        assert size.value == "2.7B"


@pytest.mark.e2e
async def test_queueing_keeps_the_user_in_the_form_and_the_next_keys_are_the_form_s():
    # ctrl+e with nothing running starts the run at once; the pane and the field stay, so the keys typed
    # next edit the form (they went to Live: "6" switched panes, "4" showed NVTX).
    app = make_app(launch_env={"PERFCONSOLE_FAULT": "slow:150"})
    async with app.run_test(size=(80, 24)) as pilot:
        ctx = app.query_one("#f-ctx", Input)
        ctx.focus()
        await pilot.pause()
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert app.launch is not None and app.active is not None   # it runs
        await _burst(app, pilot, ["end", "backspace", "backspace", "6", "4"])
        assert app.query_one("#tabs").active == "launch"
        assert app.focused is ctx and ctx.value == "64"
        assert app.active.spec.ctx == 32                            # the queued run keeps the spec it was given
        await pilot.press("ctrl+k")
        await wait_for(pilot, lambda: app.launch is None, timeout=60)

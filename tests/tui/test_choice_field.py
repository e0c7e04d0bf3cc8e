"""The launch form's choice field in an app of its own: Select's keys and clicks, a burst typed before its list
has the focus, the list mounted only when first opened, and Changed posted once per real change."""
from __future__ import annotations

import pytest
from textual import events, on
from textual.app import App

from perfconsole.tui.widgets.choice_field import ChoiceField, ChoiceList


class One(App):
    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []

    def compose(self):
        yield ChoiceField(("fp32", "bf16", "fp16"), "fp32", id="f")

    @on(ChoiceField.Changed)
    def _seen(self, event: ChoiceField.Changed) -> None:
        self.changes.append(event.value)


async def _burst(app, pilot, keys) -> None:
    """Keys as a terminal delivers a burst: all queued before the first is handled (pilot.press waits)."""
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))
    for _ in range(6):
        await pilot.pause()


async def test_keys_open_move_pick_and_close_as_select_does():
    app = One()
    async with app.run_test(size=(40, 12)) as pilot:
        field = app.query_one(ChoiceField)
        assert not field.query(ChoiceList)                  # no list until it is opened
        field.focus()
        await pilot.press("enter")
        assert field.expanded and app.focused is field.query_one(ChoiceList)
        await pilot.press("down", "enter")
        assert field.value == "bf16" and not field.expanded and app.focused is field
        await pilot.press("space", "escape")                # Esc closes, the value stays, the focus comes back
        assert field.value == "bf16" and not field.expanded and app.focused is field
        await pilot.press("up", "enter")                    # Enter on the value it has: no change to tell
        assert app.changes == ["bf16"]
        await pilot.press("enter", "end", "enter")          # the open list's own keys: End goes to the last
        assert field.value == "fp16" and app.changes == ["bf16", "fp16"]


async def test_a_name_typed_in_a_burst_before_the_list_has_the_focus_picks_it():
    app = One()
    async with app.run_test(size=(40, 12)) as pilot:
        field = app.query_one(ChoiceField)
        field.focus()
        await pilot.pause()
        await _burst(app, pilot, ["enter", "f", "p", "1", "enter"])
        assert field.value == "fp16" and not field.expanded
        assert app.changes == ["fp16"]


async def test_a_click_opens_the_list_and_a_click_on_a_choice_picks_it():
    app = One()
    async with app.run_test(size=(40, 12)) as pilot:
        field = app.query_one(ChoiceField)
        await pilot.click(ChoiceField)
        await pilot.pause()
        choices = field.query_one(ChoiceList)
        assert field.expanded and choices.display
        # the list draws under the field: its border's row, then fp32, bf16, fp16
        await pilot.click(ChoiceList, offset=(3, 3))
        await pilot.pause()
        assert field.value == "fp16" and not field.expanded


async def test_new_choices_keep_the_value_where_offered_and_refuse_a_value_not_offered():
    app = One()
    async with app.run_test(size=(40, 12)) as pilot:
        field = app.query_one(ChoiceField)
        field.value = "bf16"
        field.set_options(("bf16", "fp16"))
        assert field.value == "bf16" and field.options == ("bf16", "fp16")
        field.set_options(("fp32",))
        assert field.value == "fp32"
        with pytest.raises(ValueError, match="'int8' is not one of fp32"):
            field.value = "int8"
        await pilot.pause()
        assert app.changes == ["bf16", "fp32"]
        with pytest.raises(ValueError):
            ChoiceField(())

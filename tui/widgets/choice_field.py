"""The launch form's choice field: one widget that shows its value, and a list that mounts when first opened.

Textual's Select is six widgets (its value, two arrows, a row around them and a hidden option list), and the
form has ten of them: 50 of its 145 widgets, mounted and restyled with every console that starts, for lists
that are seldom opened. This field is one widget until it is opened; it keeps Select's keys (Enter, Space,
Up or Down open the list; in the list the arrows move, a typed name jumps to the first choice that holds it,
Enter picks, Esc or leaving the list closes it) and posts `Changed(control, value)` when its value changes,
not when it is set to the value it has.
"""
from __future__ import annotations

import time
from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive, var
from textual.widget import AwaitMount, Widget
from textual.widgets import OptionList

from perfconsole.tui.glyphs import UNICODE, Glyphs

OPEN_KEYS = ("enter", "down", "space", "up")
SEARCH_RESET_S = 0.7  # a pause this long between typed characters starts a new search (Select's figure)


def _some(choices: Iterable[str]) -> tuple[str, ...]:
    offered = tuple(choices)
    if not offered:
        raise ValueError("a choice field needs at least one choice")
    return offered


class ChoiceList(OptionList):
    """The open list: a typed name moves to the first choice holding it nearest its start, Select's rule."""

    BINDINGS = [Binding("escape", "close", "Close the list", show=False)]

    def __init__(self, choices: Iterable[str]) -> None:
        super().__init__(*choices)
        self._query, self._typed_at = "", 0.0
        self.last_key: events.Key | None = None

    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        return character is not None and character.isprintable()  # typed names are the list's, not the app's

    async def _on_key(self, event: events.Key) -> None:
        self.last_key = event  # the field above tells a key of the list's, bubbling up, from one typed ahead to it
        if event.character is None or not event.is_printable:
            return
        event.stop()
        event.prevent_default()
        self.search(event.character)

    def search(self, character: str) -> None:
        now = time.monotonic()
        self._query = (self._query if now - self._typed_at < SEARCH_RESET_S else "") + character.lower()
        self._typed_at = now
        hits = [(str(o.prompt).lower().find(self._query), i) for i, o in enumerate(self._options)]
        hits = [(at, i) for at, i in hits if at >= 0]
        if hits:
            self.highlighted = min(hits)[1]
            self.scroll_to_highlight()

    def action_close(self) -> None:
        self.parent.close(refocus=True)  # type: ignore[union-attr]

    def on_click(self, event: events.Click) -> None:
        event.stop()  # a click on a choice picks it (OptionList's own handler); it does not also toggle the field

    def _on_blur(self, event: events.Blur) -> None:
        self.parent.close(refocus=False)  # type: ignore[union-attr]


class ChoiceField(Widget, can_focus=True):
    BINDINGS = [Binding(",".join(OPEN_KEYS), "open", "Show the choices", show=False)]  # acted on in _on_key
    COMPONENT_CLASSES = {"choice-field--arrow"}
    DEFAULT_CSS = """
    ChoiceField { height: 1; width: 1fr; background: $surface; color: $foreground; pointer: pointer; }
    ChoiceField > .choice-field--arrow { color: $foreground 50%; }
    ChoiceField:focus { background-tint: $foreground 5%; }
    ChoiceField > ChoiceList {
        display: none; overlay: screen; constrain: none inside; offset-y: 1;
        width: 1fr; height: auto; max-height: 12; background: $surface; border: tall $border-blurred;
    }
    ChoiceField > ChoiceList > .option-list--option { padding: 0 1; }
    ChoiceField.-expanded > ChoiceList { display: block; }
    """

    value: reactive[str] = reactive("", layout=False, init=False)
    expanded: var[bool] = var(False, init=False, toggle_class="-expanded")  # the class shows the list

    class Changed(Message):
        """The field's value changed: a person's choice, or one set by code."""

        def __init__(self, control: ChoiceField, value: str) -> None:
            super().__init__()
            self._control, self.value = control, value

        @property
        def control(self) -> ChoiceField:
            return self._control

    def __init__(self, choices: Iterable[str], value: str | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._choices = _some(choices)
        self.set_reactive(ChoiceField.value, value if value in self._choices else self._choices[0])
        self._list: ChoiceList | None = None  # mounted when first opened
        self._mounting: AwaitMount | None = None

    @property
    def options(self) -> tuple[str, ...]:
        return self._choices

    def set_options(self, choices: Iterable[str]) -> None:
        """Offer these choices; the value stays if offered, else becomes the first (posting Changed)."""
        self._choices = _some(choices)
        if self._list is not None:
            self._list.set_options(self._choices)
        if self.value not in self._choices:
            self.value = self._choices[0]
        self.refresh()

    def validate_value(self, value: str) -> str:
        if value not in self._choices:
            raise ValueError(f"{value!r} is not one of {', '.join(self._choices)}")
        return value

    def watch_value(self, value: str) -> None:
        self.post_message(self.Changed(self, value))

    def render(self) -> Table:
        """The value, then a dim arrow and a space at the right edge, where Select draws them. A grid of two
        columns takes the width at drawing time: asking the widget its size here makes Textual lay the screen out."""
        glyphs: Glyphs = getattr(self.app, "glyphs", UNICODE)
        row = Table.grid(expand=True)
        row.add_column(ratio=1, no_wrap=True, overflow="crop")
        row.add_column(width=3)
        row.add_row(self.value, Text(f" {glyphs.down} ", style=self.get_visual_style("choice-field--arrow").rich_style))
        return row

    async def action_open(self) -> None:
        if self.expanded:
            return
        self.expanded = True  # from here the keys are the list's, also those typed before it has the focus
        if self._list is None:
            self._list = ChoiceList(self._choices)
            self._mounting = self.mount(self._list)
            await self._mounting
        self._list.highlighted = self._choices.index(self.value)
        self._list.focus(scroll_visible=False)
        self._list.scroll_to_highlight()

    async def _on_key(self, event: events.Key) -> None:
        """Keys act in the order typed (a burst over SSH): the opening keys open the list here, not as bindings
        that run once the key has gone up to the app, after the keys typed behind it; and while the list opens,
        the keys typed ahead of its focus act on it."""
        if not self.expanded:
            if event.key in OPEN_KEYS:
                event.stop()
                event.prevent_default()
                await self.action_open()
            return
        if self._list is None or event is self._list.last_key:
            return  # a key the list had (bubbled up from it) stays its bindings': arrows, Home, End, pages, Esc
        event.stop()
        event.prevent_default()
        if self._mounting is not None:
            await self._mounting
        if event.key == "escape":
            self.close(refocus=True)
        elif event.key == "enter":
            self._list.action_select()
        elif event.key in ("up", "down"):
            getattr(self._list, f"action_cursor_{event.key}")()
        elif event.character is not None and event.is_printable:
            self._list.search(event.character)

    def close(self, refocus: bool) -> None:
        self.expanded = False
        if refocus:
            self.focus()

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.value = self._choices[event.option_index]  # the same value again posts nothing (a reactive)
        self.close(refocus=True)

    @on(OptionList.OptionHighlighted)
    def _moved(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()

    async def _on_click(self, event: events.Click) -> None:
        event.stop()
        if self.expanded:
            self.close(refocus=True)
        else:
            await self.action_open()

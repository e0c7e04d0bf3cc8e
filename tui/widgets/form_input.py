"""The console's text field: keys in the order they were typed, and the console's own keys kept.

Textual's Input inserts a typed character at once but runs editing keys (backspace, arrows, home/end)
as actions a moment later, so in a burst of keys (tmux send-keys, a fast typist over SSH) a character
can land before the backspace typed ahead of it, and the backspace then deletes the wrong one
("64", backspace, "1" gave "64"). Here the editing keys act at once, in order. ctrl+e and ctrl+k stay
the console's (queue the run, cancel the run) rather than end-of-line and kill-to-end (End and
shift+End still edit); Esc leaves the field, so 1-7, q and ? work again.
"""
from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import Input

# key -> (method, its argument) run at once, in typing order
_AT_ONCE = {"backspace": ("action_delete_left", ()), "delete": ("action_delete_right", ()),
            "left": ("action_cursor_left", ()), "right": ("action_cursor_right", ()),
            "home": ("action_home", ()), "end": ("action_end", ())}
_CONSOLE_KEYS = ("ctrl+e", "ctrl+k")


def _without(keys: str) -> str:
    return ",".join(k for k in keys.split(",") if k not in _CONSOLE_KEYS)


class FormInput(Input, inherit_bindings=False):
    BINDINGS = [
        *(Binding(_without(b.key), b.action, b.description, show=b.show) for b in Input.BINDINGS
          if isinstance(b, Binding) and _without(b.key)),
        Binding("escape", "leave", "Leave field", show=False),
    ]

    async def _on_key(self, event: events.Key) -> None:
        at_once = _AT_ONCE.get(event.key)
        if at_once is not None:
            event.stop()
            event.prevent_default()
            name, args = at_once
            getattr(self, name)(*args)
            return
        await super()._on_key(event)

    def action_leave(self) -> None:
        """Focus the scrolling pane around the field (it takes no typed keys), or nothing."""
        pane = next((a for a in self.ancestors if getattr(a, "can_focus", False) and a is not self.screen), None)
        if pane is not None:
            pane.focus()
        else:
            self.screen.set_focus(None)

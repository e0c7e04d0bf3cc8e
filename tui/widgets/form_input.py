"""The console's text field: keys in the order they were typed, and the console's own keys kept.

Textual's Input inserts a typed character at once but runs its bindings (backspace, arrows, home/end,
ctrl+u, ctrl+w, word moves, ...) as actions a moment later, once the key has bubbled up to the app, so in
a burst of keys (tmux send-keys, a fast typist over SSH) a character can land before the edit typed ahead
of it ("64", backspace, "1" gave "64"; "4", ctrl+u, "2" gave "42" then ""). Here every key bound in the
field runs its action at once, in order. ctrl+e and ctrl+k stay
the console's (queue the run, cancel the run) rather than end-of-line and kill-to-end (End and
shift+End still edit); Esc leaves the field, so 1-7, q and ? work again.
"""
from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.widgets import Input

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
        """A key bound here runs its action now, in typing order; one the action skips (copy with nothing
        selected) goes on up to the console's bindings, as before."""
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):
                event.stop()
                event.prevent_default()
                return
        await super()._on_key(event)

    def action_leave(self) -> None:
        """Focus the scrolling pane around the field (it takes no typed keys), or nothing."""
        pane = next((a for a in self.ancestors if getattr(a, "can_focus", False) and a is not self.screen), None)
        if pane is not None:
            pane.focus()
        else:
            self.screen.set_focus(None)

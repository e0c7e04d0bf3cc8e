"""The console's footer: Textual's compact Footer, rebuilt only when the keys it shows change.

Textual's Footer rebuilds all its keys whenever the screen's bindings are updated, which is at every move of the
focus (Tab through the launch form, a click, a new tab), even where the keys it shows stay the same; and each key of
a compact footer is styled twice, once as it mounts and again when it takes the footer's `-compact` class. Here a
rebuild happens only when what the footer would show differs from what it shows, and each key is made with the
class already on: the same footer, drawn the same (tests/tui/test_footer.py), for 10 to 18 % less CPU in four
files of the console's in-process tests (docs/results/test_suite_time.md).
"""
from __future__ import annotations

from collections.abc import Hashable

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class ConsoleFooter(Footer):
    def __init__(self, *, show_command_palette: bool = True) -> None:
        super().__init__(compact=True, show_command_palette=show_command_palette)
        self._shown: Hashable = None

    def compose(self) -> ComposeResult:
        self._shown = self._showing()
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.add_class("-compact", update=False)  # as data_bind would give it, before its first styling
            yield widget

    def _showing(self) -> Hashable:
        """What compose would draw: the shown bindings, each with its state, and the palette's key."""
        if not self._bindings_ready:
            return None
        return (self.compact, self.show_command_palette, tuple(
            (key, b.key, b.key_display, b.action, b.description, b.group, enabled, tooltip, b.show)
            for key, (_, b, enabled, tooltip) in self.screen.active_bindings.items()
            if b.show or key == self.app.COMMAND_PALETTE_BINDING))

    def bindings_changed(self, screen: Screen) -> None:
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._rebuild_if_changed)

    async def _rebuild_if_changed(self) -> None:
        if self.is_attached and self._showing() != self._shown:
            await self.recompose()

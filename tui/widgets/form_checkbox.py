"""The console's checkbox: on and off differ in shape ([✓] / [ ], [x] / [ ] in ASCII), and a box whose other
state the rules between settings refuse keeps its state and says why.

Textual draws both states as ▐X▌, with only a dim colour for off: over SSH, in a monochrome terminal
or to a colour-blind reader on and off look the same, and the half blocks are not ASCII.
"""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Checkbox

from perfconsole.tui.glyphs import UNICODE, Glyphs


class FormCheckbox(Checkbox):
    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self._refused: str | None = None

    @property
    def refused(self) -> str | None:
        """Why the other state is not offered (the launch form sets it from core.settings.rules.why_not); None: the
        box toggles. A refused box looks as it did, so a form whose boxes are all as they may be does not change."""
        return self._refused

    @refused.setter
    def refused(self, why: str | None) -> None:
        self._refused = why
        self.tooltip = why

    def toggle(self) -> FormCheckbox:
        """A person's toggle (a key, a click); code that sets `value` is not refused."""
        if self._refused:
            self.notify(self._refused, severity="warning")
            return self
        return super().toggle()  # type: ignore[return-value]

    @property
    def _button(self) -> Content:
        glyphs: Glyphs = getattr(self.app, "glyphs", UNICODE)
        return Content.styled(glyphs.check_on if self.value else glyphs.check_off,
                              self.get_visual_style("toggle--button"))

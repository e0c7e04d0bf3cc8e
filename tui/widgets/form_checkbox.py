"""The console's checkbox: on and off differ in shape ([✓] / [ ], [x] / [ ] in ASCII).

Textual draws both states as ▐X▌, with only a dim colour for off: over SSH, in a monochrome terminal
or to a colour-blind reader on and off look the same, and the half blocks are not ASCII.
"""
from __future__ import annotations

from textual.content import Content
from textual.widgets import Checkbox

from perfconsole.tui.glyphs import UNICODE, Glyphs


class FormCheckbox(Checkbox):
    @property
    def _button(self) -> Content:
        glyphs: Glyphs = getattr(self.app, "glyphs", UNICODE)
        return Content.styled(glyphs.check_on if self.value else glyphs.check_off,
                              self.get_visual_style("toggle--button"))

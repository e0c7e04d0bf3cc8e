"""The console's main screen: the screen Textual would make, less one restyle of every widget when it first shows.

Textual restyles a screen's whole tree each time the screen resumes, so that styles changed while another screen
was on top reach it. The first resume follows the mount at once, and the mount has just styled every widget: that
restyle repeats work that changed nothing (0.908 against 0.677 CPU-s a start in
docs/results/console_resume_probe.txt). Later resumes restyle as Textual decides.
"""
from __future__ import annotations

from textual import events
from textual.screen import Screen


class ConsoleScreen(Screen):
    def __init__(self) -> None:
        super().__init__(id="_default")  # the id Textual gives its own default screen
        self._shown = False

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        """Runs before Screen's own handler of the same event, which reads `refresh_styles`."""
        if not self._shown:
            self._shown = True
            event.refresh_styles = False

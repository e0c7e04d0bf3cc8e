"""Where the launch form's mount goes besides its widgets: the restyles a focus change and the screen's resume
cause. Each prints the CPU seconds it took and how many widgets it restyled (the node and all below it).

    .venv/bin/python docs/results/probes/launch_focus_probe.py [--rounds 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from textual.screen import Screen
from textual.widget import Widget

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_console_start import PANES, Bare, cpu_to_idle  # noqa: E402

_focus, _resume = Widget.watch_has_focus, Screen._on_screen_resume


def watch_has_focus(self, value: bool) -> None:
    t = time.process_time()
    _focus(self, value)
    print(f"  {type(self).__name__} has_focus={value}: {time.process_time() - t:.3f} CPU-s, "
          f"{sum(1 for _ in self.walk_children(with_self=True))} widgets restyled")


def on_screen_resume(self, event) -> None:
    t = time.process_time()
    _resume(self, event)
    print(f"  {type(self).__name__} resumed (refresh_styles={event.refresh_styles}): "
          f"{time.process_time() - t:.3f} CPU-s")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    rounds = p.parse_args().rounds
    Widget.watch_has_focus, Screen._on_screen_resume = watch_has_focus, on_screen_resume
    for i in range(rounds):
        print(f"round {i + 1}:")
        cpu, widgets = cpu_to_idle(lambda: Bare(PANES["launch"]))
        print(f"  the launch pane alone, to idle: {cpu:.3f} CPU-s, {widgets} widgets")


if __name__ == "__main__":
    main()

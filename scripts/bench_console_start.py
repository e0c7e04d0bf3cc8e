"""Where the console's start goes: CPU seconds to mount the whole console and each of its panes, headless.

    python scripts/bench_console_start.py [--rounds 6] [--json FILE]

Every figure is this process's CPU time (user + system) from creating an app to its first idle moment under
`App.run_test` at 80x24, the median over the rounds after the first (the first imports and warms caches).
`console` is PerfConsole itself, as every console test starts it (no GPU sampler). Each pane is mounted alone
in a bare app that carries the console's stylesheet, so its widgets are styled as they are in the console.
`widgets` mounts 30 of one Textual widget in a bare app: what one widget of that kind costs, for comparison.
The console's tests start it about once each, so its start is most of the fast tier's time.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

from textual.app import App
from textual.containers import Grid
from textual.widgets import Checkbox, Input, Label, Select, Static

from perfconsole.core.settings import RunSpec
from perfconsole.tui.app import PerfConsole
from perfconsole.tui.panes.compare import ComparePane
from perfconsole.tui.panes.grids import GridsPane
from perfconsole.tui.panes.launch import LaunchPane
from perfconsole.tui.panes.live import LivePane
from perfconsole.tui.panes.profile_tables import KernelsPane, NvtxPane
from perfconsole.tui.panes.runs import RunsPane
from perfconsole.tui.widgets.choice_field import ChoiceField

PANES = {"launch": lambda: LaunchPane(RunSpec()), "live": LivePane, "kernels": KernelsPane, "nvtx": NvtxPane,
         "runs": RunsPane, "compare": ComparePane, "grids": GridsPane}
WIDGETS = {"Select": lambda: Select([(str(c), str(c)) for c in range(5)], value="1", allow_blank=False, compact=True),
           "ChoiceField": lambda: ChoiceField([str(c) for c in range(5)], "1"),
           "Input": lambda: Input("x", compact=True), "Checkbox": lambda: Checkbox("", compact=True),
           "Label": lambda: Label("label"), "Static": lambda: Static("")}


class Bare(App):
    CSS_PATH = PerfConsole.CSS_PATH

    def __init__(self, make, count: int = 1) -> None:
        super().__init__()
        self.make, self.count = make, count

    def compose(self):
        with Grid():
            for _ in range(self.count):
                yield self.make()


def cpu_to_idle(make_app) -> tuple[float, int]:
    """(CPU seconds, widgets on the screen) from making the app to its first idle moment."""
    async def go() -> int:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            return len(list(app.screen.walk_children()))
    t = time.process_time()
    n = asyncio.run(go())
    return time.process_time() - t, n


def measure(make_app, rounds: int) -> dict:
    runs = [cpu_to_idle(make_app) for _ in range(rounds)]
    cpu = [c for c, _ in runs[1:]]
    return {"cpu_s_median": round(statistics.median(cpu), 3), "cpu_s": [round(c, 3) for c in cpu],
            "widgets": runs[-1][1]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    rows = {"console": measure(lambda: PerfConsole(sampler=lambda _i: None), args.rounds)}
    for name, make in PANES.items():
        rows[f"pane {name}"] = measure(lambda make=make: Bare(make), args.rounds)
    rows["bare app"] = measure(lambda: Bare(lambda: Static(""), 0), args.rounds)
    for name, make in WIDGETS.items():
        rows[f"30 x {name}"] = measure(lambda make=make: Bare(make, 30), args.rounds)
    print(f"{'what':<20}{'widgets':>8}  {'CPU s (median)':>15}  rounds")
    for name, r in rows.items():
        print(f"{name:<20}{r['widgets']:>8}  {r['cpu_s_median']:>15.3f}  {' '.join(f'{c:.3f}' for c in r['cpu_s'])}")
    if args.json:
        args.json.write_text(json.dumps({"rounds_after_the_first": args.rounds - 1, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

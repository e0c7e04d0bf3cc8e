"""The main screen's first show with and without Textual's restyle of every widget, in turn in one process.

    .venv/bin/python docs/results/probes/console_resume_probe.py [--rounds 12]

Each round starts the console twice (as every console test starts it, at 80x24, to its first idle moment): once
as it is (ConsoleScreen skips the first resume's restyle), once with that skip switched off. It prints each
arm's median CPU seconds and every round's.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from bench_console_start import cpu_to_idle  # noqa: E402

from perfconsole.tui.app import PerfConsole  # noqa: E402
from perfconsole.tui.screens import console_screen  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=12)
    rounds = p.parse_args().rounds
    skip = console_screen.ConsoleScreen.on_screen_resume
    arms: dict[str, list[float]] = {"first resume not restyled": [], "first resume restyled": []}
    make = lambda: PerfConsole(sampler=lambda _i: None)  # noqa: E731
    cpu_to_idle(make)  # imports and caches
    for _ in range(rounds):
        for arm, times in arms.items():
            console_screen.ConsoleScreen.on_screen_resume = skip if arm.endswith("not restyled") else (lambda self, e: None)
            gc.collect()
            times.append(cpu_to_idle(make)[0])
    for arm, times in arms.items():
        print(f"{arm}: median {statistics.median(times):.3f} CPU-s; rounds {' '.join(f'{t:.3f}' for t in times)}")


if __name__ == "__main__":
    main()

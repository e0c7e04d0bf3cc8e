"""What `sweep` and `attention` share: running cells under a progress bar, Ctrl-C, and the ending.

Progress goes to stderr (a bar with the cell being run and the time left, and one line per finished
cell so logs show it too); the grid goes to stdout, or its JSON with --json. Ctrl-C stops the
running cell and keeps every finished one.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from perfconsole.core.cli.main import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, ctrl_c_calls
from perfconsole.core.grids.cell_runner import MAX_START_AHEAD, SweepUpdate, default_start_ahead


def add_start_ahead_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start-ahead", type=_start_ahead, default=None, metavar="N",
                   help="start the next N cells' processes together, so torch is imported once per N cells and "
                        "never while a cell is measured; 1 starts each cell's process in its turn (default: half "
                        f"the CPU cores, 1 to {MAX_START_AHEAD}; {default_start_ahead()} here)")


def _start_ahead(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= n <= MAX_START_AHEAD:
        raise argparse.ArgumentTypeError(f"give 1 to {MAX_START_AHEAD}, not {n}")
    return n


def format_seconds(s: float | None) -> str:
    if s is None:
        return "estimating"
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def run_cells(runner: Any, total: int, label: Callable[[Any], str], outcome: Callable[[Any], str]) -> Console:
    """Run `runner` (a SweepRunner or AttentionRunner) with progress on stderr; returns that console.

    `label(cell)` names a cell; `outcome(cell)` says how a finished one went.
    """
    err = Console(stderr=True, highlight=False)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("· left {task.fields[eta]}"), console=err) as bar:
        task = bar.add_task("starting", total=total, eta="estimating")

        def on_update(u: SweepUpdate) -> None:
            name = f"[{u.index + 1}/{u.total}] {label(u.run)}"
            if u.cell_finished:
                bar.console.print(f"{name}: {outcome(u.run)}")
                bar.update(task, completed=u.done, eta=format_seconds(u.eta_s))
            else:
                bar.update(task, description=f"{name} {u.run.stage}".rstrip(), eta=format_seconds(u.eta_s))

        with ctrl_c_calls(runner.cancel):
            runner.run(on_update)
    return err


def finish(record: Any, statuses: Iterable[str], save: Path | None, as_json: bool, json_text: Callable[[Any], str],
           table: Callable[[Any], Any], err: Console) -> int:
    """Say where the snapshot went, print the grid (or its JSON), and choose the exit code."""
    if save:
        err.print(f"saved {save}")
    if as_json:
        sys.stdout.write(json_text(record))
    else:
        Console().print(table(record))
    if record.status == "cancelled":
        return EXIT_CANCELLED
    return EXIT_ERROR if "error" in set(statuses) else EXIT_OK

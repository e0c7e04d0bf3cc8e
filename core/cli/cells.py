"""What `sweep` and `attention` share: running cells under a progress bar, stop signals, and the ending.

Progress goes to stderr (a bar with the cell being run and the time left, and one line per finished
cell so logs show it too); the grid goes to stdout, or with --json the grid's snapshot (the text
--save writes). Ctrl-C, SIGTERM and SIGHUP stop the running cell, keep every finished one and the
steps of the stopped one, and the exit code is 128 + the signal's number.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from perfconsole.core import store
from perfconsole.core.cli.executor import job_where, jobs_text
from perfconsole.core.cli.main import EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, reader_may_be_gone
from perfconsole.core.grids.cell_runner import MAX_START_AHEAD, SweepUpdate, default_start_ahead
from perfconsole.core.launch.processes import Stop


def add_start_ahead_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--start-ahead", type=_start_ahead, default=None, metavar="N",
                   help="start the next N cells' processes together, so torch is imported once per N cells and "
                        "never while a cell is measured; 1 starts each cell's process in its turn (default: half "
                        f"the CPU cores, 1 to {MAX_START_AHEAD}; {default_start_ahead()} here)")


def add_gpus_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", default=None, metavar="I,J,...",
                   help="GPU indices (as nvidia-smi numbers them) to run cells on, one cell per GPU at a time, "
                        "the grid in its own order (default: every visible GPU; cuda only)")


def gpus_from_args(text: str | None, device: str) -> list[str] | None:
    """The GPUs a grid's cells are spread over: the ones named, else every visible one on cuda."""
    from perfconsole.core.settings import SpecError
    from perfconsole.core.telemetry.nvml import visible_gpus

    if device != "cuda":
        if text is not None:
            raise SpecError("gpus", "cells on the cpu run one at a time; --gpus needs device cuda")
        return None
    visible = visible_gpus()
    if text is None:
        return [str(i) for i in visible] or None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items or not all(x.isdigit() for x in items):
        raise SpecError("gpus", f"give GPU indices like 0,1, not {text!r}")
    if len(set(items)) != len(items):
        raise SpecError("gpus", f"a GPU is named twice in {text!r}")
    missing = [x for x in items if int(x) not in visible]
    if missing:
        raise SpecError("gpus", f"GPU {missing[0]} is not visible here (visible: {', '.join(map(str, visible)) or 'none'})")
    return items


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


def run_cells(runner: Any, total: int, label: Callable[[Any], str], outcome: Callable[[Any], str],
              stop: Stop) -> Console:
    """Run `runner` (a SweepRunner or AttentionRunner) with progress on stderr; returns that console.

    `label(cell)` names a cell; `outcome(cell)` says how a finished one went; a stop signal cancels.
    """
    err = Console(stderr=True, highlight=False)
    # A long cell label gives way (ellipsis), not the bar, the count or the time left, which end the line
    # (an 80-column log cut the line to "… · lef…").
    label_column = Column(no_wrap=True, overflow="ellipsis", max_width=max(16, err.width - 50))
    bar = Progress(TextColumn("{task.description}", table_column=label_column), BarColumn(bar_width=20),
                   MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("· left {task.fields[eta]}", table_column=Column(no_wrap=True)), console=err)
    task = bar.add_task("starting", total=total, eta="estimating")
    last_jobs: list[dict[str, int]] = []  # the queue as the last update saw it, said whole at the end

    def on_update(u: SweepUpdate) -> None:
        if u.jobs:
            last_jobs[:] = [u.jobs]
        name = f"[{u.index + 1}/{u.total}] {label(u.run)}"
        with reader_may_be_gone():  # stderr gone (a dropped SSH session): the cells go on
            if u.cell_finished:
                gpus = getattr(runner.record, "cell_gpus", None) or []
                where = f" (GPU {gpus[u.index]})" if u.index < len(gpus) and gpus[u.index] is not None else ""
                bar.console.print(f"{name}{where or job_where(u.run)}: {outcome(u.run)}", markup=False,
                                  soft_wrap=True)  # one line a cell
                bar.update(task, completed=u.done, eta=format_seconds(u.eta_s))
                if u.jobs:
                    bar.update(task, description=escape(jobs_text(u.jobs)))
            else:
                # A stage or label may hold brackets ("install perfconsole[fast]"): text, not markup.
                queue = f" · {jobs_text(u.jobs)}" if u.jobs else ""
                bar.update(task, description=escape(f"{name} {u.run.stage}".rstrip() + queue),
                           eta=format_seconds(u.eta_s))

    with reader_may_be_gone():
        # Cells that ended before any process (a ladder's rung its spec rules out) are said as the others are.
        for i, cell in enumerate(getattr(runner.record, "runs", None) or []):
            if cell.status == "unsupported":
                err.print(f"[{i + 1}/{total}] {label(cell)}: {outcome(cell)}", markup=False, soft_wrap=True)
        bar.start()
    try:
        with stop.cancelling(runner.cancel):
            runner.run(on_update)
    finally:
        with reader_may_be_gone():
            bar.stop()
            if last_jobs:  # the bar's label column may cut it on a narrow log; this line is whole
                err.print(jobs_text(last_jobs[0]), markup=False, soft_wrap=True)
    return err


def finish(record: Any, statuses: Iterable[str], save: Path | None, as_json: bool, table: Callable[[Any], Any],
           err: Console, stop: Stop) -> int:
    """Say where the snapshot went, print the grid (or with --json its snapshot), and choose the exit code."""
    with reader_may_be_gone():
        if save:
            err.print(f"saved {save}", markup=False, highlight=False, soft_wrap=True)  # a path is one line
        if as_json:
            print(store.dumps(record), end="", flush=True)
        else:
            Console().print(table(record))
    if record.status == "cancelled":
        return stop.exit_code(EXIT_CANCELLED)
    return stop.exit_code(EXIT_ERROR if "error" in set(statuses) else EXIT_OK)


def outcome(r: Any, tokens: bool = False) -> str:
    """A finished cell (a rung, a count) in one progress line: its median step (and the job's tokens/s), or
    its status and error in words."""
    if r.status == "ok" and r.summary:
        return f"{r.summary.total_ms.median:,.2f} ms (median)" + (
            f", {r.summary.tokens_per_s:,.0f} tokens/s" if tokens else "")
    if r.error is None:
        return r.status
    return r.error.text() if r.error.kind == r.status else f"{r.status} ({r.error.text()})"

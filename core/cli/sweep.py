"""`perfconsole sweep`: a size x ctx x precision x mode (x warm-up) grid, one child process per cell.

Progress goes to stderr (a rich progress bar with the cell being run and the time left, plus one line
per finished cell, so logs show it too); the grid goes to stdout, or its snapshot with --json.
Ctrl-C, SIGTERM and SIGHUP stop the running cell and keep every finished one (saved with --save,
printed as usual); `export --format json` gives the `{"runs": [...]}` report.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rich.text import Text

from perfconsole.core.cli.main import add_force_argument, check_default_size, check_device, save_path
from perfconsole.core.cli.spec_args import add_spec_arguments, check_size_given, fill_defaults, given, split_axes
from perfconsole.core.launch.model_choice import check as check_model
from perfconsole.core.cli.cells import (add_gpus_argument, add_start_ahead_argument, finish, gpus_from_args,
                                         run_cells)
from perfconsole.core.cli.executor import add_executor_arguments, executor_from_args, is_remote
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.launch.processes import install_exit_handlers
from perfconsole.core.settings import SWEEP, RunSpec, SpecError
from perfconsole.core.record import RunRecord
from perfconsole.core.grids.sweep import SweepRecord, SweepRunner, SweepSpec

T = TypeVar("T")

# What a cell that has no time shows instead; the text alone when piped.
STATUS_CELLS = {"oom": Text("OOM", style="bold red"), "pending": Text("not run", style="dim")}


def parse_list(text: str, conv: Callable[[str], T], field: str) -> tuple[T, ...]:
    """`a,b,c` -> a tuple; a bad item is a SpecError naming the field."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise SpecError(field, "give a comma-separated list")
    out = []
    for x in items:
        try:
            out.append(conv(x))
        except ValueError:
            raise SpecError(field, f"{x!r} is not a valid value") from None
    return tuple(out)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", help="run a grid of sizes x contexts x precisions x modes, one process per cell")
    add_spec_arguments(p, SWEEP)
    p.add_argument("--json", action="store_true",
                   help="print the snapshot (what --save writes) instead of a grid")
    p.add_argument("--save", default=None, metavar="FILE", help="save the sweep snapshot here (after every cell)")
    add_force_argument(p)
    p.add_argument("--out-dir", default=None, help="where cells' files go")
    add_start_ahead_argument(p)
    add_gpus_argument(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def sweep_spec_from_args(args: argparse.Namespace) -> SweepSpec:
    values, grid = split_axes(fill_defaults(given(args, SWEEP)))
    base = RunSpec(**{**values, "size": grid["size"][0]})
    if not is_remote(args):
        check_device(base.device)
    check_model(base.model, base.model_args)  # an architecture or file that is not there, before its sizes
    check_size_given(args, base.model)
    if not args.size:
        check_default_size(base.model, base.size, base.device)
    five = ("size", "ctx", "precision", "mode", "warmup")
    extra = tuple((name, values) for name, values in grid.items() if name not in five and values != (getattr(base, name),))
    return SweepSpec(base, *(grid[name] for name in five), extra).validate()


def grid_table(sw: SweepRecord) -> CliTable:
    """Rows: size x ctx (x warm-up); one column per precision x mode with the mean ± std step time.
    Printed fitted to a terminal or tab-separated (core/cli/tables.py)."""
    sp = sw.spec
    keys = sp.columns()
    t = CliTable(f"{sw.name} — {sw.status}", [Column("size" if sp.base.model == "builtin" else "model", "label"),
                                                Column("ctx")]
                 + ([Column("warm-up")] if sp.is_warmup_study else [])
                 + [Column(f"{m} {p}{sp.extra_words(e)} (ms)") for p, m, e in keys], title_justify="left")
    by = {(r.spec.size, r.spec.ctx, r.spec.warmup, sp.column_of(r.spec)): r for r in sw.runs}
    for size in sp.sizes:
        for ctx in sorted(sp.ctxs):
            for w in sp.warmups:
                label = sp.base.with_(size=size).model_label()  # a factory's model is its name, not a size
                row: list[str | Text] = [label, str(ctx)] + ([str(w)] if sp.is_warmup_study else [])
                for key in keys:
                    r = by[(size, ctx, w, key)]
                    if r.status == "ok" and r.summary:
                        row.append(f"{r.summary.total_ms.mean:,.2f} ± {r.summary.total_ms.std:,.2f}")
                    else:
                        row.append(STATUS_CELLS.get(r.status, Text(r.status)))
                t.add_row(*row)
    return t


def run(args: argparse.Namespace) -> int:
    spec = sweep_spec_from_args(args)
    gpus = None if is_remote(args) else gpus_from_args(args.gpus, spec.base.device)
    save = save_path(args.save, args.force)
    executor = executor_from_args(args, device=spec.base.device)
    stop = install_exit_handlers()
    record = SweepRecord.new(spec)
    runner = SweepRunner(record, out_dir=Path(args.out_dir) if args.out_dir else None, save_to=save,
                         start_ahead=args.start_ahead, gpus=gpus, executor=executor)
    err = run_cells(runner, len(record.runs), lambda r: r.spec.label(), _sweep_outcome, stop)
    return finish(record, (r.status for r in record.runs), save, args.json, grid_table, err, stop)


def _sweep_outcome(r: RunRecord) -> str:
    if r.status == "ok" and r.summary:
        return f"{r.summary.total_ms.mean:,.2f} ms"
    if r.error is None:
        return r.status
    return r.error.text() if r.error.kind == r.status else f"{r.status} ({r.error.text()})"

"""`perfconsole attention`: a d x seq grid of causal attention, eager against compiled against SDPA.

Like `sweep`: a progress bar on stderr, one process per cell, Ctrl-C (or SIGTERM, SIGHUP) keeps
finished cells; the grid goes to stdout, or its snapshot with --json (`export --format json` gives the
`{"cells": [...]}` report).
"""
from __future__ import annotations

import argparse

from rich.text import Text

from perfconsole.core.grids.attention import IMPLS, AttentionRecord, AttentionRunner, AttentionSpec
from perfconsole.core.cli.executor import add_executor_arguments, executor_from_args, is_remote
from perfconsole.core.cli.main import add_force_argument, check_device, default_device, save_path
from perfconsole.core.cli.cells import (add_gpus_argument, add_start_ahead_argument, finish, gpus_from_args,
                                         run_cells)
from perfconsole.core.cli.sweep import STATUS_CELLS, parse_list
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.launch.processes import install_exit_handlers
from perfconsole.core.settings import DEVICES, PRECISIONS


# The sequence lengths of the grid by device: on a 2-core CPU the naive cell at 4096 alone takes minutes.
SEQS = {"cuda": "256,1024,4096,8192,16384", "cpu": "256,1024"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="benchmark causal attention over a d x seq grid, one process per cell")
    p.add_argument("--d", default="16,32,64,128", help="comma list of head dimensions")
    p.add_argument("--seq", default=None, help=f"comma list of sequence lengths (default: {SEQS['cuda']} on cuda; "
                   f"{SEQS['cpu']} on cpu, where the grid up to 16384 would take days)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--impl", default="naive,sdpa", help=f"comma list of {', '.join(IMPLS)}")
    p.add_argument("--compile", action="store_true", help="add a torch.compile'd naive variant")
    p.add_argument("--precision", default="fp32", help=f"comma list of {', '.join(PRECISIONS)}")
    p.add_argument("--warmup", type=int, default=10, help="untimed forward+backward passes per cell")
    p.add_argument("--iters", type=int, default=100, help="timed forward and timed backward passes per cell")
    p.add_argument("--device", default=None, help=f"{', '.join(DEVICES)} (default: cuda when available)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true",
                   help="print the snapshot (what --save writes) instead of a grid")
    p.add_argument("--save", default=None, metavar="FILE", help="save the grid snapshot here (after every cell)")
    add_force_argument(p)
    add_start_ahead_argument(p)
    add_gpus_argument(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def spec_from_args(args: argparse.Namespace) -> AttentionSpec:
    device = args.device or default_device()
    seq = args.seq or SEQS.get(device, SEQS["cuda"])
    spec = AttentionSpec(parse_list(args.d, int, "d"), parse_list(seq, int, "seq"), args.batch,
                         parse_list(args.impl, str, "impl"), args.compile, parse_list(args.precision, str, "precision"),
                         args.warmup, args.iters, device, args.seed).validate()
    if not is_remote(args):
        check_device(spec.device)
    return spec


def grid_table(a: AttentionRecord) -> CliTable:
    """Rows d x seq; per variant and precision, forward / backward ms or the cell's status.
    Printed fitted to a terminal or tab-separated (core/cli/tables.py)."""
    keys = [(impl + ("+compile" if comp else ""), p) for p in a.spec.precisions for impl, comp in a.spec.variants()]
    t = CliTable(f"{a.name} — {a.status}", [Column("d"), Column("seq")]
                 + [Column(f"{v} {p} fwd/bwd (ms)") for v, p in keys], title_justify="left")
    by = {(c.cell.variant, c.cell.precision, c.cell.d, c.cell.seq): c for c in a.cells}
    for d in sorted(a.spec.ds):
        for s in sorted(a.spec.seqs):
            row: list[str | Text] = [str(d), str(s)]
            for v, p in keys:
                c = by[(v, p, d, s)]
                fwd = f"{c.forward_ms.mean:,.3f}" if c.forward_ms else "-"
                bwd = f"{c.backward_ms.mean:,.3f}" if c.backward_ms else "-"
                if c.status == "ok":
                    row.append(f"{fwd} / {bwd}")
                elif c.status == "oom":
                    row.append(Text.assemble(f"{fwd} / ", STATUS_CELLS["oom"]))
                else:
                    row.append(STATUS_CELLS.get(c.status, Text(c.status)))
            t.add_row(*row)
    return t


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    gpus = None if is_remote(args) else gpus_from_args(args.gpus, spec.device)
    save = save_path(args.save, args.force)
    executor = executor_from_args(args, device=spec.device)
    stop = install_exit_handlers()
    record = AttentionRecord.new(spec)
    runner = AttentionRunner(record, save_to=save, start_ahead=args.start_ahead, gpus=gpus,
                             executor=executor)
    err = run_cells(runner, len(record.cells), lambda c: c.cell.label(), _cell_outcome, stop)
    return finish(record, (c.status for c in record.cells), save, args.json, grid_table, err, stop)


def _cell_outcome(c) -> str:
    fwd = f"fwd {c.forward_ms.mean:,.3f} ms" if c.forward_ms else "fwd -"
    bwd = f"bwd {c.backward_ms.mean:,.3f} ms" if c.backward_ms else "bwd -"
    return f"{c.status} {fwd} {bwd}" + (f" ({c.error})" if c.error and c.status != "ok" else "")

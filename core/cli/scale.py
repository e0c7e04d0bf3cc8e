"""`perfconsole scale`: the scaling curve, one spec at each process count of `--nproc 1,2,4`: the one-process
program first (added where the counts leave 1 out), then a torchrun job per count, each in its turn. The table
goes to stdout with the bars below it, or with --json the curve's snapshot (what --save writes).

Everything that can be refused is refused before any process starts: a count the machine has no GPUs for,
a --strong batch that does not divide by every count, a spec a job cannot run. Progress, signals and exit
codes are the sweep's (core/cli/cells.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from perfconsole.core import store
from perfconsole.core.cli.cells import finish, outcome, run_cells
from perfconsole.core.cli.main import (UsageError, add_force_argument, check_default_size, check_device, save_path,
                                       spec_from_args)
from perfconsole.core.cli.spec_args import add_spec_arguments, check_gpus, check_size_given
from perfconsole.core.cli.sweep import parse_list
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.grids.scale import SCALE, ScaleRecord, ScaleRunner, ScaleSpec
from perfconsole.core.launch.model_choice import check as check_model
from perfconsole.core.launch.processes import install_exit_handlers
from perfconsole.core.reports import scale as report


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scale", help="the scaling curve: one spec at each process count (1,2,4...), the one "
                                     "process first, then a data-parallel job per count; weak or strong scaling")
    p.add_argument("--nproc", dest="counts", default=None, metavar="1,2,4",
                   help="comma list of process counts, one GPU each on cuda; 1 (the one-process program) is added "
                        "where it is left out")
    p.add_argument("--strong", action="store_true",
                   help="strong scaling: hold the global batch (the one process has --batch, each of N ranks "
                        "batch/N; --batch must divide by every count); default weak scaling, each rank --batch")
    add_spec_arguments(p, SCALE)
    p.add_argument("--resume", default=None, metavar="FILE",
                   help="go on with a saved curve: its own settings, the counts that finished kept, the others run "
                        "now; saved back to FILE unless --save names another")
    p.add_argument("--json", action="store_true", help="print the snapshot (what --save writes) instead of a table")
    p.add_argument("--save", default=None, metavar="FILE", help="save the curve's snapshot here (after every count)")
    add_force_argument(p)
    p.add_argument("--out-dir", default=None, help="where the counts' files go (torchrun's logs, profiles)")
    p.set_defaults(func=run)


def scale_spec_from_args(args: argparse.Namespace) -> ScaleSpec:
    if not args.counts:  # the counts are the curve: no default that could start many processes unasked
        raise UsageError("nproc: give the process counts, e.g. --nproc 1,2,4")
    counts = parse_list(args.counts, int, "nproc")
    base = spec_from_args(args, validate=False, command=SCALE)
    if not args.parallel:
        base = base.with_(parallel="ddp")
    check_model(base.model, base.model_args)  # an architecture or file that is not there, before its size
    check_size_given(args, base.model)
    if not args.size:
        check_default_size(base.model, base.size, base.device)
    spec = ScaleSpec.of(base, counts, strong=args.strong).validate()
    check_counts(spec)
    return spec


def check_counts(spec: ScaleSpec) -> None:
    """The GPUs each count needs, as `run --nproc` checks them: on cuda, one visible GPU per process."""
    check_device(spec.base.device)
    if spec.base.device == "cuda":
        from perfconsole.core.telemetry.nvml import visible_gpus

        check_gpus(max(spec.counts), len(visible_gpus()))


def scale_table(scale: ScaleRecord) -> CliTable:
    t = CliTable(f"{scale.name} — {scale.status}",
                 [Column("processes", "label"), Column("batch/rank"), Column("status"), Column("step (ms)"),
                  Column("interval"), Column("tokens/s"), Column(report.efficiency_label(scale)),
                  Column("exposed (ms)"), Column("comm (ms)"), Column("busbw (GB/s)"), Column("link (GB/s)"),
                  Column("peak/GPU (GiB)")], title_justify="left")
    t.caption = "\n".join([*report.notes(scale), *report.bar_lines(scale)])
    for row in report.rows(scale):
        t.add_row(report.count_text(row), str(row.per_rank_batch),
                  Text(report.status_text(row), style="green" if row.status == "ok" else "yellow"),
                  *report.cells(row))
    return t


def run(args: argparse.Namespace) -> int:
    if args.resume:
        record = resumed(args.resume)
        target = args.save or args.resume  # resuming writes the curve back to its own file: no --force for that
        own = Path(target).expanduser().resolve() == Path(args.resume).expanduser().resolve()
        save = save_path(target, args.force or own)
    else:
        record = ScaleRecord.new(scale_spec_from_args(args))
        save = save_path(args.save, args.force)
    stop = install_exit_handlers()
    runner = ScaleRunner(record, out_dir=Path(args.out_dir) if args.out_dir else None, save_to=save)
    err = run_cells(runner, len(record.runs), lambda r: r.name, lambda r: outcome(r, tokens=True), stop)
    return finish(record, (r.status for r in record.runs), save, args.json, scale_table, err, stop)


def resumed(path: str) -> ScaleRecord:
    """The saved curve at `path`, its unfinished counts pending again; UsageError if it is not a curve."""
    try:
        record = store.load(path, stdin=False)
    except store.SnapshotError as exc:
        raise UsageError(str(exc)) from exc
    if not isinstance(record, ScaleRecord):
        raise UsageError(f"{path}: a {record.kind} snapshot, not a scaling curve")
    check_counts(record.spec)
    if not record.reopen():
        raise UsageError(f"{path}: every count has finished; nothing to resume")
    return record

"""`perfconsole ladder`: the optimization ladder, one process per rung (or --repeat N), each rung the last
plus one change; the table goes to stdout, or with --json the ladder's snapshot (what --save writes).

Progress, signals and exit codes are the sweep's (core/cli/cells.py). An unsupported rung (no GPU for
CUDA graphs, no perfconsole[fast] for liger or fp8) is a row that says why, not an error: the exit
code is 1 only where a rung failed.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from perfconsole.core.cli.cells import add_start_ahead_argument, finish, outcome, run_cells
from perfconsole.core import store
from perfconsole.core.cli.executor import add_executor_arguments, executor_from_args, is_remote
from perfconsole.core.cli.main import (UsageError, add_force_argument, check_default_size, check_device, save_path,
                                       spec_from_args)
from perfconsole.core.cli.spec_args import add_spec_arguments, check_size_given
from perfconsole.core.cli.sweep import parse_list
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.grids.ladder import (DEFAULT_RUNGS, DP_RUNG_NAMES, DP_RUNGS, LADDER, RUNG_NAMES, RUNGS,
                                          LadderRecord, LadderRunner, LadderSpec)
from perfconsole.core.launch.model_choice import check as check_model
from perfconsole.core.launch.processes import install_exit_handlers
from perfconsole.core.reports.ladder import (busy_legend, busy_text, carry_notes, moved_text, rows, rung_text,
                                             speedup_cells, status_text, verdicts)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ladder", help="the optimization ladder: rungs from eager to fp8, one process each; with "
                                      "--nproc N, data-parallel rungs from DDP to FSDP, one job each")
    add_spec_arguments(p, LADDER)
    p.add_argument("--rungs", default=None,
                   help=f"comma list of the rungs to run, from {', '.join(RUNG_NAMES)} (default "
                        f"{','.join(DEFAULT_RUNGS)}; {', '.join(r.name for r in RUNGS if r.opt_in) or 'none'} only when "
                        f"named), or with --nproc 2 or more from {', '.join(DP_RUNG_NAMES)} (default all but "
                        f"{' and '.join(r.name for r in DP_RUNGS if r.opt_in)}, which run only when named); one left "
                        "out still passes its change up, unless it runs only when named")
    p.add_argument("--no-profile", action="store_true",
                   help="skip each rung's torch-profiler pass (no kernel categories, no measured GPU busy share)")
    p.add_argument("--resume", default=None, metavar="FILE",
                   help="go on with a saved ladder: its own settings, the rungs that finished kept, the ones that "
                        "did not (cancelled, never started) run now; saved back to FILE unless --save names another")
    p.add_argument("--json", action="store_true", help="print the snapshot (what --save writes) instead of a table")
    p.add_argument("--save", default=None, metavar="FILE", help="save the ladder snapshot here (after every rung)")
    add_force_argument(p)
    p.add_argument("--out-dir", default=None, help="where rungs' profiler files go")
    add_start_ahead_argument(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def ladder_spec_from_args(args: argparse.Namespace) -> LadderSpec:
    base = spec_from_args(args, validate=False, command=LADDER)
    check_model(base.model, base.model_args)  # an architecture or file that is not there, before its size
    check_size_given(args, base.model)
    if not args.size:
        check_default_size(base.model, base.size, base.device)
    base.validate()
    if not is_remote(args):
        check_device(base.device)
    rungs = parse_list(args.rungs, str, "rungs") if args.rungs else ()
    return LadderSpec(base, rungs, profile=not args.no_profile).validate()


def ladder_table(ladder: LadderRecord) -> CliTable:
    if ladder.spec.base.nproc > 1:
        return dp_table(ladder)
    t = CliTable(f"{ladder.name} — {ladder.status}",
                 [Column("rung", "label"), Column("status"), Column("step (ms)"), Column("vs first"),
                  Column("vs prev"), Column("MFU"), Column("SoL"), Column("GPU busy"), Column("loss Δ"),
                  Column("moved (ms/step)")], title_justify="left")
    rs = rows(ladder)
    found = verdicts(rs)
    legend = busy_legend(rs)
    t.caption = "\n".join([*carry_notes(rs), *found.over_counted, *found.best, *([legend] if legend else [])])
    for row in rs:
        st = status_text(row)
        t.add_row(rung_text(row), Text(st, style="green" if row.status == "ok" else "yellow"),
                  "-" if row.median_ms is None else f"{row.median_ms:,.2f}",
                  *speedup_cells(row),
                  "-" if row.mfu is None else f"{100 * row.mfu:.1f}%",
                  "-" if row.sol_fraction is None else f"{100 * row.sol_fraction:.1f}%", busy_text(row),
                  "-" if row.loss_max_rel_diff is None else f"{row.loss_max_rel_diff:.1e} {row.numerics}",
                  moved_text(row))
    return t


def dp_table(ladder: LadderRecord) -> CliTable:
    """A data-parallel ladder: per rung its job's step beside its one-process program's, weak scaling, the
    collectives' time and what the step waited for, peak memory per GPU; the bars below (core.reports.scaling_bars)."""
    from perfconsole.core.reports.scaling_bars import bars, exposed_cell, lines

    n = ladder.spec.base.nproc
    t = CliTable(f"{ladder.name} — {n} processes — {ladder.status}",
                 [Column("rung", "label"), Column("status"), Column(f"{n} GPUs (ms)"), Column("1 GPU (ms)"),
                  Column("weak scaling"), Column("comm (ms)"), Column("exposed (ms)"), Column("peak/GPU (GiB)"),
                  Column("loss Δ")], title_justify="left")
    rs = rows(ladder)
    found = verdicts(rs)
    t.caption = "\n".join([*carry_notes(rs), *found.best, *lines(bars(rs, n))])
    f = lambda v, d=2, k=1.0: "-" if v is None else f"{v * k:,.{d}f}"  # noqa: E731
    for row in rs:
        peak = "-" if row.peak_alloc_mib is None else (
            f"{row.peak_alloc_mib / 1024:,.1f}" + (f" of {row.card_mib / 1024:,.1f}" if row.card_mib else ""))
        t.add_row(rung_text(row), Text(status_text(row), style="green" if row.status == "ok" else "yellow"),
                  f(row.median_ms), f(row.single_process_ms),
                  "-" if row.scaling_efficiency is None else f"{row.scaling_efficiency:.1%}", f(row.comm_ms),
                  exposed_cell(row.exposed_comm_ms), peak,
                  "-" if row.loss_max_rel_diff is None else f"{row.loss_max_rel_diff:.1e} {row.numerics}")
    return t


def run(args: argparse.Namespace) -> int:
    if args.resume:
        record = resumed(args.resume, remote=is_remote(args))
        target = args.save or args.resume  # resuming writes the ladder back to its own file: no --force for that
        own = Path(target).expanduser().resolve() == Path(args.resume).expanduser().resolve()
        save = save_path(target, args.force or own)
    else:
        record = LadderRecord.new(ladder_spec_from_args(args))
        save = save_path(args.save, args.force)
    executor = executor_from_args(args, device=record.spec.base.device)
    stop = install_exit_handlers()
    runner = LadderRunner(record, out_dir=Path(args.out_dir) if args.out_dir else None, save_to=save,
                          start_ahead=args.start_ahead, executor=executor)
    err = run_cells(runner, len(record.runs), lambda r: r.name, outcome, stop)
    return finish(record, (r.status for r in record.runs), save, args.json, ladder_table, err, stop)


def resumed(path: str, remote: bool = False) -> LadderRecord:
    """The saved ladder at `path`, its unfinished rungs pending again; UsageError if it is not a ladder."""
    try:
        record = store.load(path, stdin=False)
    except store.SnapshotError as exc:
        raise UsageError(str(exc)) from exc
    if not isinstance(record, LadderRecord):
        raise UsageError(f"{path}: a {record.kind} snapshot, not a ladder")
    if not remote:
        check_device(record.spec.base.device)
    reopened = record.reopen()
    if not reopened:
        raise UsageError(f"{path}: every rung has finished; nothing to resume")
    return record

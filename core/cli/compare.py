"""`perfconsole compare --vary FIELD=A,B[,...] [run flags] --repeat N`: one configuration against
variants of it, their replicate processes interleaved (A1 B1 A2 B2 ...), as a comparison snapshot.

The base spec comes from the same flags as `run`; each value of --vary replaces that one field. With
--repeat N every variant runs in N processes and the speedups use the spread between processes; a
stop signal keeps what was measured (saved and printed), as `run` does.
"""
from __future__ import annotations

import argparse

from rich.console import Console

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.cli.main import (EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, UsageError, add_force_argument,
                                       add_spec_arguments, deliver, reader_may_be_gone, save_path, spec_from_args)
from perfconsole.core.cli.executor import add_executor_arguments, executor_from_args
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.launch.interleave import InterleavedRuns
from perfconsole.core.launch.processes import install_exit_handlers
from perfconsole.core.reports.compare import Comparison
from perfconsole.core.reports.names import differs_first
from perfconsole.core.settings.declarations import convert, declared
from perfconsole.core.settings import RunSpec, SpecError

# Any setting of one process can vary (a job's settings are `run --scaling`'s; the processes are --repeat).
VARYING = tuple(f.name for f, s in declared(RunSpec) if s.section != "parallel" and f.name not in ("repeat", "model_args"))


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="a configuration against variants of it, processes interleaved")
    add_spec_arguments(p)
    p.add_argument("--vary", required=True, metavar="FIELD=A,B", action="append",
                   help=f"the field that differs and its values, the first the baseline ({', '.join(VARYING)}); "
                        "one field: `perfconsole sweep` crosses several")
    p.add_argument("--json", action="store_true", help="print the comparison's snapshot instead of a table")
    p.add_argument("--save", default=None, metavar="FILE", help="save the comparison snapshot (JSON) here")
    add_force_argument(p)
    add_executor_arguments(p)
    p.set_defaults(func=run)


def variants(base: RunSpec, vary: str) -> list[RunSpec]:
    """The specs --vary describes, each validated; one-line errors name the field and the values."""
    field, sep, values = vary.partition("=")
    field = field.strip().replace("-", "_")
    if not sep or field not in VARYING:
        raise UsageError(f"--vary: give FIELD=A,B with FIELD one of {', '.join(VARYING)}, not {vary!r}")
    declared_field = {f.name: f for f, _ in declared(RunSpec)}[field]
    out = []
    for raw in [v.strip() for v in values.split(",")]:
        try:
            value = convert(declared_field, raw)
        except ValueError as exc:
            raise UsageError(f"--vary {field}: {exc}") from None
        out.append(base.with_(**{field: value}).validate())
    if len(out) < 2 or len({repr(s) for s in out}) < len(out):
        raise SpecError("vary", f"give at least two different values of {field}")
    return out


def run(args: argparse.Namespace) -> int:
    base = spec_from_args(args)
    if len(args.vary) > 1:  # argparse would keep the last one silently
        raise UsageError(f"--vary: one field at a time, not {len(args.vary)} ({'; '.join(args.vary)}); "
                         "`perfconsole sweep` crosses several")
    specs = variants(base, args.vary[0])
    save = save_path(args.save, args.force)
    executor = executor_from_args(args, nproc=base.nproc, device=base.device)
    stop = install_exit_handlers()
    runner = InterleavedRuns(specs, executor=executor)
    err = Console(stderr=True, highlight=False)

    def progress(i: int, event: ev.Event) -> None:
        if isinstance(event, ev.Replicate):
            with reader_may_be_gone():
                err.print(f"[dim]{specs[i].label()}[/] process {event.index + 1} of {event.of}")
        elif isinstance(event, ev.Step) and not event.warmup:
            n = event.index - specs[i].warmup + 1
            with reader_may_be_gone():
                err.print(f"  step {n}/{specs[i].steps}: {event.total_ms:.3f} ms")
        elif isinstance(event, ev.Error):
            with reader_may_be_gone():
                err.print(f"{specs[i].label()}: {event.text()}", style="bold red", markup=False)

    with stop.cancelling(runner.cancel):
        records = runner.run(progress)
    comparison = Comparison(records)
    statuses = {r.status for r in records}
    code = EXIT_OK if statuses == {"ok"} else EXIT_CANCELLED if "cancelled" in statuses else EXIT_ERROR
    return deliver(store.dumps(comparison), lambda: comparison_table(comparison), save, args.json, err, stop, code)


def comparison_table(c: Comparison) -> CliTable:
    """The runs with the figure their speedups are ratios of, named as the exports name it (Comparison.basis)."""
    t = CliTable(f"compare: {c.name}", [Column("run", "label"), Column("status", "label"),
                                          Column(f"{c.basis()} (ms)"), Column(f"{c.basis('median')} (ms)"),
                                          Column("processes"), Column("speedup vs run 1", "label")],
                 title_justify="left")
    heads = differs_first(c.runs)  # what tells the runs apart first: a cut name keeps it
    for i, (r, st, s) in enumerate(zip(c.runs, c.speedup_stats(), c.speedup_texts())):
        t.add_row(f"{i + 1}: {heads[i]}", r.status, *(("-", "-") if st is None else (f"{st.mean:,.3f}", f"{st.median:,.3f}")),
                  str(r.summary.processes if r.summary else 0), s)
    notes = [n for n in (c.work_note(), c.throughput_note()) if n]
    t.caption = "\n".join([f"processes ran interleaved; {c.speedup_rule()}; {c.interval_basis()}", *notes])
    return t

"""`perfconsole gate`: did the change make the step slower? Two programs on this machine, their processes
interleaved (A B A B ...) or, with --paired, their steps alternating inside each process, and a verdict from the
95% interval of B/A against a threshold: regression (exit 1), inconclusive (exit 3, --inconclusive-exit), same or
improved (exit 0); a process that failed, or an output file that could not be written, exits 4; bad input 2. docs/gate.md has the CI jobs.

The two programs: `--vary FIELD=A,B` (two specs, as `compare`), `--rev BASE --rev HEAD` with `--model
PATH.py:FACTORY` (the model file at two git revisions, each checked out in a temporary worktree), or
`--python PATH` twice (the worker under each interpreter).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time

from rich.console import Console

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.cli.main import (UsageError, add_force_argument, add_spec_arguments, deliver, reader_may_be_gone,
                                       save_path, save_snapshot, spec_from_args)
from perfconsole.core.cli.spec_args import check_spec
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.gate import programs as progs
from perfconsole.core.gate.record import EXIT_FAILED, EXIT_INCONCLUSIVE, GateRecord
from perfconsole.core.gate.rounds import GateRounds
from perfconsole.core.gate.runner import METRICS, Budget, Settings, run_gate
from perfconsole.core.gate.verdict import parse_threshold
from perfconsole.core.launch.processes import install_exit_handlers
from perfconsole.core.reports import gate as report

DEFAULT_BUDGET = "50s"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="a regression gate for CI: B against A, exit 1 on a regression")
    add_spec_arguments(p)
    g = p.add_argument_group("gate settings")
    g.add_argument("--vary", action="append", metavar="FIELD=A,B", help="two specs: the field and its two values, A first")
    g.add_argument("--rev", action="append", metavar="REV",
                   help="twice: two git revisions of the --model PATH.py:FACTORY file, A (the base) first")
    g.add_argument("--python", action="append", metavar="PATH", help="twice: the worker under each interpreter, A first")
    g.add_argument("--paired", action="store_true",
                   help="both programs in one process, their steps alternating (A B, B A, ...): the ratio over pairs")
    g.add_argument("--threshold", default="3%", metavar="PCT",
                   help="step time (and --metric) within ±PCT of A is `same`")
    g.add_argument("--memory-threshold", default="2%", metavar="PCT|MiB",
                   help="peak allocated and reserved memory within ± this (3%% or 64MiB) of A is `same`")
    g.add_argument("--metric", action="append", choices=METRICS, metavar="FIELD",
                   help=f"also gate this summary field (tokens_per_s, mfu, ...; one of {', '.join(METRICS)})")
    g.add_argument("--budget", default=DEFAULT_BUDGET, metavar="SECONDS|N",
                   help="add processes while inconclusive, up to this wall time (60s, 2m) or N processes a program")
    g.add_argument("--inconclusive-exit", type=int, default=EXIT_INCONCLUSIVE, metavar="N",
                   help="the exit code of an inconclusive gate")
    g.add_argument("--json", action="store_true", help="print the gate's snapshot instead of a table")
    g.add_argument("--markdown", metavar="FILE", help="write a Markdown summary here (e.g. $GITHUB_STEP_SUMMARY; appended to)")
    g.add_argument("--junit", metavar="FILE", help="write JUnit XML here, one testcase per metric")
    g.add_argument("--save", metavar="FILE", help="save the gate's snapshot (JSON) here")
    add_force_argument(p)
    p.set_defaults(func=run)


def settings_from_args(args: argparse.Namespace) -> Settings:
    try:
        return Settings(parse_threshold(args.threshold, "--threshold"),
                        parse_threshold(args.memory_threshold, "--memory-threshold", ("MiB",)),
                        Budget.parse(args.budget), args.paired, tuple(dict.fromkeys(args.metric or ())))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def programs_from_args(args: argparse.Namespace, stack: contextlib.ExitStack) -> list[progs.Program]:
    """The two programs; checkouts of revisions are entered on `stack`, which removes them."""
    given = [name for name in ("vary", "rev", "python") if getattr(args, name)]
    if len(given) != 1:
        raise UsageError("gate: give exactly one of --vary FIELD=A,B, --rev twice or --python twice"
                         + (f", not {' and '.join('--' + g for g in given)}" if given else ""))
    kind = given[0]
    values = getattr(args, kind)
    if kind == "vary":
        from perfconsole.core.cli.compare import variants

        if len(values) > 1:
            raise UsageError("--vary: one field, with two values")
        specs = variants(spec_from_args(args), values[0])
        if len(specs) != 2:
            raise UsageError(f"--vary: two values, A and B, not {len(specs)}")
        return progs.from_specs(specs, values[0].partition("=")[0].strip().replace("-", "_"))
    if len(values) != 2:
        raise UsageError(f"--{kind}: give it twice, A then B, not {len(values)} times")
    try:
        if kind == "python":
            if args.paired:
                raise UsageError("--paired runs both programs in one process, under one interpreter: not with --python")
            return progs.from_pythons(spec_from_args(args), values)
        trees = progs.Worktrees(args.model, values)
        base = spec_from_args(args, validate=False)
        stack.enter_context(trees)
        out = trees.programs(base)
        for p in out:
            check_spec(p.spec, args)
        return out
    except progs.ProgramError as exc:
        raise UsageError(str(exc)) from None


def check_paired(programs: list[progs.Program]) -> None:
    """What one process cannot hold for both programs, said before any process starts."""
    from perfconsole.core.measure.paired import process_wide

    if len({p.spec.device for p in programs}) > 1 or any(p.spec.nproc > 1 for p in programs):
        raise UsageError("--paired: both programs run in one process, so on one device with one process each")
    asked = sorted({w for p in programs for w in process_wide(p.spec)})
    if asked:
        raise UsageError(f"--paired: not with --{', --'.join(asked)}: it patches the whole process, so it would reach "
                         "both programs; run without --paired")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    settings = settings_from_args(args)
    paths = [save_path(f, args.force) for f in (args.save, args.junit)]
    markdown = save_path(args.markdown, True)  # a step summary file is appended to
    err = Console(stderr=True, highlight=False)
    with contextlib.ExitStack() as stack:
        programs = programs_from_args(args, stack)
        if settings.paired:
            check_paired(programs)
        stop = install_exit_handlers()
        runner = GateRounds(programs, settings.paired)

        def progress(i: int, event: ev.Event) -> None:
            if isinstance(event, ev.Replicate):
                who = "both programs" if settings.paired else programs[i].label
                with reader_may_be_gone():
                    err.print(f"{who}: process {event.index + 1}", style="dim", markup=False, highlight=False)
            elif isinstance(event, ev.Error):
                with reader_may_be_gone():
                    err.print(f"{programs[i].label}: {event.text()}", style="bold red", markup=False)

        def each_round(r: int, now: list) -> None:
            with reader_may_be_gone():
                err.print(f"  after {r}: " + "; ".join(f"{v.metric} {v.change_text()} {v.verdict}" for v in now
                                                       if v.verdict != "unmeasured"), markup=False)

        with stop.cancelling(runner.cancel):
            record = run_gate(programs, settings, started, progress, each_round, runner)
    code = record.exit_code(args.inconclusive_exit)
    text = store.dumps(record)
    written = [save_snapshot(path, made()) for path, made in ((paths[0], lambda: text), (paths[1], lambda: report.junit(record)))
               if path is not None]
    if markdown is not None:
        written.append(append(markdown, report.markdown(record)))
    if not all(written):  # the verdict still prints; the job learns a file it asked for is missing
        code = EXIT_FAILED
    elif paths[0] is not None:
        with reader_may_be_gone():
            err.print(f"saved {paths[0]}", markup=False, highlight=False, soft_wrap=True)
    return deliver(text, lambda: gate_table(record), None, args.json, err, stop, code)


def append(path, text: str) -> bool:
    """Append to a file (a CI step summary holds what earlier steps wrote); a failure is one line on stderr."""
    try:
        with path.open("a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        with contextlib.suppress(OSError):
            print(f"perfconsole: error: {path}: cannot write ({exc.strerror or exc})", file=sys.stderr)
        return False
    return True


def gate_table(g: GateRecord) -> CliTable:
    t = CliTable(report.headline(g), [Column("metric", "label"), Column("A", "label"), Column("B", "label"),
                                      Column("B vs A [95% interval]", "label"), Column("verdict", "label")],
                 title_justify="left")
    for row in report.rows(g):
        t.add_row(*row)
    notes = [f"{v.metric}: {report.verdict_detail(v)}" for v in g.verdicts if v.verdict == "inconclusive"]
    t.caption = "\n".join([*report.footer(g), *notes])
    return t

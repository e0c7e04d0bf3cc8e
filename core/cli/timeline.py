"""`perfconsole timeline SNAPSHOT_OR_TRACE [--step N] [--width W] [--rank R] [--ascii]`: when the kernels ran, as
text rows for pipes and CI logs (core.timeline), from a torch trace or an nsys SQLite export. A source without timestamps (nsys stats tables, an nvprof log)
says so in one line and exits 2."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from perfconsole.core.cli.main import EXIT_OK, UsageError, reader_may_be_gone


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("timeline", help="when the kernels ran: a torch profiler trace or an nsys capture (or a run "
                       "snapshot's) drawn as text rows, one a GPU stream, copies, ranges; the GPU's idle gaps and busy share")
    p.add_argument("source", metavar="SNAPSHOT_OR_TRACE",
                   help="a run snapshot profiled with --profile torch or nsys, its torch_trace.json (.json.gz too), or "
                        "an nsys capture's SQLite export (nsys export --type sqlite)")
    p.add_argument("--step", type=int, metavar="N", help="draw profiled step N (1 is the first); default: the whole trace")
    p.add_argument("--width", type=int, metavar="W", help="cells across (default: the terminal's width, 120 in a pipe)")
    p.add_argument("--rank", type=int, metavar="R", help="a data-parallel job's rank (default: every rank)")
    p.add_argument("--ascii", action="store_true", help="letters for categories instead of Unicode blocks")
    p.add_argument("--launches", action="store_true", help="also the host threads' CUDA launches, a lane each")
    p.add_argument("--depth", type=int, default=4, metavar="D", help="range nesting depths drawn")
    p.set_defaults(func=run)


def open_source(arg: str) -> tuple[object, str]:
    """(the timeline, what it was read from); UsageError, one line, where there is none."""
    from perfconsole.core import store
    from perfconsole.core.record import RunRecord
    from perfconsole.core.timeline.load import load_timeline
    from perfconsole.core.timeline.model import TimelineError
    from perfconsole.core.timeline.source import is_trace_file, record_traces, untimed_reason

    path = Path(arg).expanduser()
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    try:
        if path.is_file() and is_trace_file(path):
            return load_timeline([path]), str(path)
        try:
            obj = store.load(path, stdin=False)
        except store.SnapshotError:
            raise UsageError(untimed_reason(path)) from None
        if not isinstance(obj, RunRecord):
            raise UsageError(f"{path}: a {obj.kind} snapshot, not a run")
        traces = record_traces(obj, path)
        return load_timeline([t for _, t in traces], [r for r, _ in traces]), str(path)
    except TimelineError as exc:
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from perfconsole.core.timeline.model import TimelineError
    from perfconsole.core.timeline.render import render
    from perfconsole.core.timeline.captions import busy_lines, legend, window_line

    if args.width is not None and args.width < 10:
        raise UsageError(f"--width {args.width}: at least 10")
    tl, source = open_source(args.source)
    try:
        if args.rank is not None:
            tl.rank(args.rank)
        step = tl.step(args.step, args.rank) if args.step is not None else None
    except TimelineError as exc:
        raise UsageError(str(exc)) from None
    t0, t1 = (step.start, step.end) if step else tl.span(args.rank)
    labels = 12 + (3 if len(tl.ranks) > 1 and args.rank is None else 0)
    width = args.width or max(20, (shutil.get_terminal_size((120 + labels + 1, 24)).columns if sys.stdout.isatty()
                                   else 120 + labels + 1) - labels - 1)
    frame = render(tl, t0, t1, width, args.rank, args.ascii, args.launches, args.depth)
    ranks = [args.rank] if args.rank is not None else [r.rank for r in tl.ranks]
    steps = len(tl.rank(ranks[0]).steps)
    lines = [f"{source}" + (f" · rank {args.rank}" if args.rank is not None else
                             f" · {len(tl.ranks)} ranks" if len(tl.ranks) > 1 else ""),
             window_line(frame.t0, frame.t1, width, args.step, steps), *frame.lines(), legend(args.ascii)]
    for r in ranks:
        lines += busy_lines(tl, r, frame.t0, frame.t1)
    with reader_may_be_gone():
        if sys.stdout.isatty() and not args.ascii:
            _print_coloured(lines, frame)
        else:
            sys.stdout.write("\n".join(lines) + "\n")
            sys.stdout.flush()
    return EXIT_OK


def _print_coloured(lines: list[str], frame) -> None:
    from rich.console import Console
    from rich.text import Text

    from perfconsole.core.timeline.render import STYLES

    console = Console(highlight=False, soft_wrap=True)
    w = max([len(r.label) for r in frame.rows] + [len(frame.unit) + 4])
    console.print(lines[0], markup=False)
    console.print(lines[1], markup=False)
    for row in frame.rows:
        text = Text(f"{row.label:<{w}} ")
        for ch, cat in zip(row.text, row.cats):
            text.append(ch, style=STYLES.get(cat, ""))
        console.print(text)
    for line in lines[2 + len(frame.rows):]:
        console.print(line, markup=False)

"""`perfconsole timeline SNAPSHOT_OR_TRACE [--step N] [--width W] [--rank R] [--ascii] [--svg FILE]`: when the
kernels ran, as text rows for pipes and CI logs (core.timeline.drawing), from a torch trace or an nsys SQLite export;
with --svg the same drawing, coloured by category, as an SVG file. A source without timestamps (nsys stats tables,
an nvprof log) says so in one line and exits 2."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from perfconsole.core import store
from perfconsole.core.cli.main import EXIT_OK, UsageError, add_force_argument, reader_may_be_gone, save_path


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
    p.add_argument("--svg", metavar="FILE", help="write the drawing, coloured by category, as an SVG image to FILE "
                   "(atomic) instead of printing it")
    add_force_argument(p)
    p.set_defaults(func=run)


def open_source(arg: str) -> tuple[object, str]:
    """(the timeline, what it was read from); UsageError, one line, where there is none."""
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
    from perfconsole.core.timeline.drawing import draw, label_width, styled, svg
    from perfconsole.core.timeline.model import TimelineError

    if args.width is not None and args.width < 10:
        raise UsageError(f"--width {args.width}: at least 10")
    output = save_path(args.svg, args.force)  # checked before the trace is read
    tl, source = open_source(args.source)
    labels = label_width(tl, args.rank)
    width = args.width or max(20, (shutil.get_terminal_size((120 + labels + 1, 24)).columns if sys.stdout.isatty()
                                   else 120 + labels + 1) - labels - 1)
    try:
        drawing = draw(tl, source, width, args.step, args.rank, args.ascii, args.launches, args.depth)
    except TimelineError as exc:
        raise UsageError(str(exc)) from None
    if output is not None:
        try:
            store.write_atomic(output, svg(drawing))
        except OSError as exc:
            raise UsageError(f"{output}: cannot write ({exc.strerror or exc})") from exc
        with reader_may_be_gone():
            print(f"wrote {output}", file=sys.stderr)
        return EXIT_OK
    with reader_may_be_gone():
        if sys.stdout.isatty() and not args.ascii:
            from rich.console import Console

            Console(highlight=False, soft_wrap=True).print(styled(drawing))
        else:
            sys.stdout.write("\n".join(drawing.lines) + "\n")
            sys.stdout.flush()
    return EXIT_OK

"""`perfconsole export SNAPSHOT --format md|csv|json|trace|svg [-o FILE]` (trace: a run as a Chrome trace; svg: a
profiled run's timeline, the drawing `perfconsole timeline` prints, as an SVG image).

SNAPSHOT is a file that `--save` wrote or `--json` printed (or an older `run --json` document); `-`
reads it from standard input: `perfconsole run ... --json | perfconsole export - --format md`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from perfconsole.core import store
from perfconsole.core.cli.main import UsageError, add_force_argument, reader_may_be_gone, save_path
from perfconsole.core.reports.export import FORMATS, export


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="turn a snapshot into a Markdown, CSV or JSON report, a run into a "
                       "Chrome trace (Perfetto), or a profiled run's timeline into an SVG")
    p.add_argument("snapshot", help="a snapshot file (.json) saved or printed (--json) by perfconsole; - for stdin")
    p.add_argument("--format", "-f", default="md", help=f"{', '.join(FORMATS)} (default md)")
    p.add_argument("--output", "-o", default=None, help="write here instead of stdout (atomic)")
    add_force_argument(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise UsageError(f"format: must be one of {', '.join(FORMATS)}, not {args.format!r}")
    output = save_path(args.output, args.force)  # checked before the input is read
    try:
        text = export(store.load(args.snapshot), args.format, None if args.snapshot == "-" else Path(args.snapshot))
    except (store.SnapshotError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    if output is not None:
        try:
            store.write_atomic(output, text)
        except OSError as exc:
            raise UsageError(f"{output}: cannot write ({exc.strerror or exc})") from exc
        print(f"wrote {output}", file=sys.stderr)
    else:
        with reader_may_be_gone():
            sys.stdout.write(text)
            sys.stdout.flush()
    return 0

"""`perfconsole export SNAPSHOT --format md|csv|json [-o FILE]`."""
from __future__ import annotations

import argparse
import sys

from perfconsole.core import store
from perfconsole.core.cli.main import UsageError
from perfconsole.core.reports.export import FORMATS, export
from perfconsole.core.paths import PathError, output_file


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="turn a snapshot into a Markdown, CSV or JSON report")
    p.add_argument("snapshot", help="a snapshot file (.json) saved by perfconsole")
    p.add_argument("--format", "-f", default="md", help=f"{', '.join(FORMATS)} (default md)")
    p.add_argument("--output", "-o", default=None, help="write here instead of stdout (atomic)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        obj = store.load(args.snapshot)
        text = export(obj, args.format)
        if args.output:
            store.write_atomic(output_file(args.output), text)
            print(f"wrote {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(text)
    except (store.SnapshotError, PathError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    return 0

"""The `perfconsole` command: a sub-command runs headless (core), no sub-command opens the console.

Textual is imported only when the console opens, so headless commands start fast.
"""
from __future__ import annotations

import argparse
import sys

from perfconsole.core.cli import main as cli


def console_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("console", "pre-fill the launch form (same flags as `run`)")
    cli.add_spec_arguments(group)  # type: ignore[arg-type]
    group.add_argument("--start", action="store_true", help="launch the pre-filled run at once")
    group.add_argument("--ascii", action="store_true", help="draw with plain ASCII characters only")


def open_console(args: argparse.Namespace) -> int:
    """Pre-fill the form from the flags, then run the console (textual is imported only now)."""
    from perfconsole.core.launch import processes
    from perfconsole.core.spec import SpecError
    from perfconsole.tui.app import PerfConsole

    errors: list[str] = []
    try:
        spec = cli.spec_from_args(args)
    except SpecError as exc:
        if args.start:
            raise  # scripts get the one-line error and exit 2
        errors.append(str(exc))
        spec = cli.spec_from_args(args, validate=False)  # the form shows what is wrong in place
    app = PerfConsole(spec, start=args.start, ascii_only=args.ascii, prefill_errors=errors)
    app.install_signals = True
    try:
        code = app.run()
    finally:
        processes.kill_all()
    return int(code or 0)


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, console=(console_options, open_console))


if __name__ == "__main__":
    sys.exit(main())

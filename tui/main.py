"""The `perfconsole` command: a sub-command runs headless (core), no sub-command opens the console.

Textual is imported only when the console opens, so headless commands start fast.
"""
from __future__ import annotations

import argparse
import sys

from perfconsole.core import cli


def console_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("console", "pre-fill the launch form (same flags as `run`)")
    cli.add_spec_arguments(group)  # type: ignore[arg-type]
    group.add_argument("--start", action="store_true", help="launch the pre-filled run at once")
    group.add_argument("--ascii", action="store_true", help="draw with plain ASCII characters only")


def open_console(args: argparse.Namespace) -> int:
    from perfconsole.tui.app import run_console

    return run_console(args)


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, console=(console_options, open_console))


if __name__ == "__main__":
    sys.exit(main())

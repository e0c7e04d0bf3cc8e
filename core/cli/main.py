"""The headless CLI: `perfconsole run | sweep | attention | ladder | scale | import | export | timeline`.

Each sub-command lives in its own module with `add_parser(subparsers)`; the parser it adds sets
`func(args) -> int`. Bad input exits 2 with one line on stderr and no traceback. With no sub-command
the console starts; that dispatch lives in perfconsole.tui.main, since core never imports the tui.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

from perfconsole.core import paths, store
from perfconsole.core.cli.spec_args import (add_spec_arguments, check_default_size, check_device,  # noqa: F401
                                            default_device, default_size, spec_from_args)
from perfconsole.core.settings import SpecError

COMMANDS = [
    "perfconsole.core.cli.run",
    "perfconsole.core.cli.export",
    "perfconsole.core.cli.profile_import",
    "perfconsole.core.cli.sweep",
    "perfconsole.core.cli.attention",
    "perfconsole.core.cli.compare",
    "perfconsole.core.cli.ladder",
    "perfconsole.core.cli.kernels",
    "perfconsole.core.cli.scale",
    "perfconsole.core.cli.gate",
    "perfconsole.core.cli.timeline",
]

# Each sub-command's name and module. A command line that begins with one builds only that command's parser:
# importing every command's module cost `perfconsole run` about 0.7 s on a 2-core machine before its worker
# started (pandas and pyarrow, which only the profile readers need).
COMMAND_MODULES = dict(zip(("run", "export", "import", "sweep", "attention", "compare", "ladder", "kernels",
                            "scale", "gate", "timeline"), COMMANDS))

# The commands that keep files in the data directory (the peaks and FLOP caches, profiles, the console's warm
# process they fork from): a data directory that cannot be one is bad input for them, said before any work.
DATA_DIR_COMMANDS = ("run", "sweep", "attention", "compare", "ladder", "scale", "gate")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_OOM, EXIT_CANCELLED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class _Help(argparse.HelpFormatter):
    """Help that shows each flag's default where it has one and the help text does not say it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" not in text and action.default not in (None, False, argparse.SUPPRESS)
                and action.option_strings and not isinstance(action, argparse._StoreFalseAction)):
            # a store_false flag's default, True, is the setting it turns off: "(default: True)" misreads
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Help)
        # No prefixes: `ladder --mode` read as an abbreviation was "ambiguous: --model, --model-arg".
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_force_argument(p: argparse.ArgumentParser) -> None:
    """--force, beside a command's --save FILE or -o FILE."""
    p.add_argument("--force", action="store_true",
                   help="replace the file to write if it exists (without it an existing file is refused, "
                        "before any work)")


def save_path(arg: str | None, force: bool = False) -> Path | None:
    """The --save FILE (or -o FILE) of a command, checked before any work starts: its directory
    exists and takes a new file, and an existing file is replaced only with `force` (--force), so a bad
    path loses nothing measured and a typo replaces nothing measured before."""
    if not arg:
        return None
    try:
        return store.writable_file(arg, overwrite=force)
    except store.FileExists as exc:
        raise UsageError(f"{exc.path}: exists; give --force to replace it") from exc
    except store.SnapshotError as exc:
        raise UsageError(str(exc)) from exc


def deliver(text: str, table: Callable[[], Any], save: Path | None, as_json: bool, err: Any, stop: Any,
            code: int) -> int:
    """The end of a measuring command: save the snapshot `text`, then print it (--json) or `table()` (where
    that is None, nothing: the run measured nothing and stderr said why).

    Returns the exit code: 128 + a stop signal, else `code`, or an error when the save failed.
    """
    saved = save is not None and save_snapshot(save, text)
    with reader_may_be_gone():
        if saved:
            err.print(f"saved {save}", markup=False, highlight=False, soft_wrap=True)  # a path is one line
        if as_json:
            print(text, end="", flush=True)
        else:
            from rich.console import Console

            shown = table()
            if shown is not None:
                Console().print(shown)
    return stop.exit_code(code if saved or save is None else EXIT_ERROR)


def save_snapshot(path: Path, text: str) -> bool:
    """Write a snapshot after the work; a failure (the directory went away since `save_path` checked
    it) is one line on stderr, and the caller still prints what was measured."""
    try:
        store.write_atomic(path, text)
    except OSError as exc:
        with contextlib.suppress(OSError):
            print(f"perfconsole: error: {path}: cannot save ({exc.strerror or exc})", file=sys.stderr)
        return False
    return True


@contextlib.contextmanager
def reader_may_be_gone() -> Iterator[None]:
    """Printing inside may fail because the reader has gone (`| head`, a dropped SSH session): that is
    no error, since what was measured is already saved. Output goes nowhere from then on."""
    try:
        yield
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            for stream in (sys.stdout, sys.stderr):
                os.dup2(devnull, stream.fileno())


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's `version`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("perfconsole")
    except PackageNotFoundError:  # run from a checkout that was never installed: no metadata to read
        return "(not installed: no package metadata)"


def build_parser(console_options: Callable[[argparse.ArgumentParser], None] | None = None,
                 only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; with `only`, a command's name, that command's alone (the rest are not imported)."""
    # No abbreviations: the console's flags would swallow sub-command flags (`attention --d` as --device).
    parser = _Parser(prog="perfconsole", allow_abbrev=False,
                     description="Benchmark and profile Transformer LMs on NVIDIA GPUs. "
                                 "With no command, opens the console.")
    parser.add_argument("--version", action="version", version=f"perfconsole {package_version()}",
                        help="print perfconsole's version and exit")
    if console_options:
        console_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in [COMMAND_MODULES[only]] if only in COMMAND_MODULES else COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None,
         console: tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(console[0] if console else None, argv[0] if argv else None)
    args = parser.parse_args(argv)
    if args.command is not None and args.command in argv:
        before = [a for a in argv[:argv.index(args.command)] if a.startswith("-")]
        if before:  # the console's flags: the command's own defaults would replace them silently
            parser.error(f"{', '.join(before)}: given before {args.command!r}, the console's flags, which "
                         f"{args.command!r} never sees; give {args.command}'s flags after it")
    try:
        if args.command is None and console is None:
            parser.print_help()
            return EXIT_USAGE
        if args.command is None or args.command in DATA_DIR_COMMANDS:
            paths.check_data_dir()
        if args.command is None:
            return console[1](args)
        return args.func(args)
    except (SpecError, UsageError, paths.PathError) as exc:
        print(f"perfconsole: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED


if __name__ == "__main__":
    # Run as `python -m`, this file is `__main__`; the subcommands import `perfconsole.core.cli.main`, whose
    # UsageError must be the one caught above, so the command runs from that module.
    from perfconsole.core.cli import main as _cli

    sys.exit(_cli.main())

"""The `perfconsole` command: a sub-command runs headless (core), no sub-command opens the console,
and `serve` serves the console in a browser (tui/serve.py).

Textual is imported only when the console opens, so headless commands start fast.
"""
from __future__ import annotations

import argparse
import os
import sys

from perfconsole.core.cli import main as cli


SERVE_EPILOG = ("perfconsole serve [--host 127.0.0.1] [--port 8000] [console flags]: serve the console in a "
                "browser, one console per tab (perfconsole serve --help).")


def console_options(parser: argparse.ArgumentParser) -> None:
    if parser.prog == "perfconsole":  # the top-level help; serve is no core command, so it is named here
        parser.epilog = SERVE_EPILOG
    group = parser.add_argument_group("console", "pre-fill the launch form (same flags as `run`)")
    cli.add_spec_arguments(group)  # type: ignore[arg-type]
    group.add_argument("--start", action="store_true", help="launch the pre-filled run at once")
    group.add_argument("--ascii", action="store_true", help="draw with plain ASCII characters only")


def open_console(args: argparse.Namespace) -> int:
    """Pre-fill the form from the flags, then run the console (textual is imported only now)."""
    if not os.environ.get("TEXTUAL_DRIVER") and not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Piped (`perfconsole | cat`) the console would draw escape codes into the pipe and wait for
        # keys that never come; a browser session (serve) brings its own driver and passes.
        raise cli.UsageError("the console needs a terminal (stdin and stdout are not both one); "
                             "headless work is a sub-command, e.g. `perfconsole run ... --json` (see --help), "
                             "or serve it to a browser with `perfconsole serve`")
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
    from perfconsole.tui import exit_guard

    app = PerfConsole(spec, start=args.start, ascii_only=args.ascii, prefill_errors=errors)
    app.install_signals = True
    # From here on the console cannot outlive its terminal (tui/exit_guard.py): a stop signal, a hung-up
    # terminal or a dead parent ends it within a few seconds, whatever state textual is in.
    app.exit_guard = guard = exit_guard.ExitGuard()
    guard.arm(watch_tty=None if os.environ.get("TEXTUAL_DRIVER") else sys.__stdin__.fileno())
    app.install_stop_signals()
    if app.driver_class is exit_guard.LinuxDriver:
        app.driver_class = exit_guard.ConsoleDriver
    code = None
    try:
        code = app.run()
    finally:
        processes.kill_all()
        if app.stop_signal is None:
            guard.rescue = None  # a plain quit keeps only what the user saved
        # Leaving may stall too (a thread that will not end): the guard bounds it, keeping the code.
        guard.trip(int(code or 0) if app.stop_signal is None else 128 + app.stop_signal)
    return int(code or 0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # a console concern (textual), so it is dispatched here, not by core's parser
        from perfconsole.tui import serve

        return serve.main(args[1:], console_options)
    return cli.main(args, console=(console_options, open_console))


if __name__ == "__main__":
    sys.exit(main())

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
    from perfconsole.core.cli.executor import add_executor_arguments

    add_executor_arguments(group)  # type: ignore[arg-type]  # the ladder's rungs as Slurm jobs


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
    from perfconsole.core.cli.executor import executor_from_args

    executor = executor_from_args(args, device=spec.device)
    app = PerfConsole(spec, start=args.start, ascii_only=args.ascii, prefill_errors=errors)
    app.executor = executor
    app.install_signals = True
    try:
        code = app.run()
    finally:
        processes.kill_all()
    return int(code or 0)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # a console concern (textual), so it is dispatched here, not by core's parser
        from perfconsole.tui import serve

        return serve.main(args[1:], console_options)
    return cli.main(args, console=(console_options, open_console))


if __name__ == "__main__":
    sys.exit(main())

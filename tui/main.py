"""The `perfconsole` command: a sub-command runs headless (core), no sub-command opens the console,
and `serve` serves the console in a browser (tui/serve.py).

Textual is imported only when the console opens, so headless commands start fast.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

from perfconsole.core.cli import main as cli


SERVE_HELP = "serve the console in a browser, one console per tab, behind a token (serve --help)"


class _CommandsWithServe(argparse._SubParsersAction):
    """core's sub-commands, with `serve` listed last among them (in --help and in the choices an unknown
    command is told of). serve is dispatched by main() before core's parser runs, since it is a console
    concern; core's parser only meets it when flags come before it, and refuses those flags in one line
    (as for any command) before serve's stand-in would run."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        # No prefix character that argv can hold (NUL): whatever follows `serve` here is taken as is and
        # reaches _serve_not_first, rather than failing as flags serve's stand-in does not know.
        serve = super().add_parser("serve", help=SERVE_HELP, add_help=False, prefix_chars="\0")
        serve.add_argument("rest", nargs="*")
        serve.set_defaults(func=_serve_not_first)

    def add_parser(self, name: str, **kwargs: object) -> argparse.ArgumentParser:
        parser = super().add_parser(name, **kwargs)  # type: ignore[arg-type]
        # keep serve after the commands core adds: move its entry to the end of both listings
        self._name_parser_map["serve"] = self._name_parser_map.pop("serve")
        self._choices_actions.append(
            self._choices_actions.pop(next(i for i, a in enumerate(self._choices_actions) if a.dest == "serve")))
        return parser


def _serve_not_first(args: argparse.Namespace) -> int:
    raise cli.UsageError("serve takes its flags after it: perfconsole serve [--port 8000] [console flags]")


def console_options(parser: argparse.ArgumentParser) -> None:
    if parser.prog == "perfconsole":  # the top-level parser: its sub-commands will include serve
        parser.register("action", "parsers", _CommandsWithServe)
    group = parser.add_argument_group("console", "pre-fill the launch form (same flags as `run`)")
    cli.add_spec_arguments(group)  # type: ignore[arg-type]
    group.add_argument("--start", action="store_true", help="launch the pre-filled run at once")
    group.add_argument("--ascii", action="store_true", help="draw with plain ASCII characters only")
    from perfconsole.core.cli.executor import add_executor_arguments

    add_executor_arguments(group)  # type: ignore[arg-type]  # the ladder's rungs as Slurm jobs


def open_console(args: argparse.Namespace) -> int:
    """Pre-fill the form from the flags, then run the console (textual is imported only now).

    A bad flag stops it before it starts, in one line, exit 2, as every command's bad flag does: `--size huge`
    is refused as `--ctx abc` is (argparse), not opened as a form quietly back at its default."""
    spec = cli.spec_from_args(args)
    if not os.environ.get("TEXTUAL_DRIVER") and not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Piped (`perfconsole | cat`) the console would draw escape codes into the pipe and wait for
        # keys that never come; a browser session (serve) brings its own driver and passes.
        raise cli.UsageError("the console needs a terminal (stdin and stdout are not both one); "
                             "headless work is a sub-command, e.g. `perfconsole run ... --json` (see --help), "
                             "or serve it to a browser with `perfconsole serve`")
    from perfconsole.core.measure import gc_control

    gc_control.space()  # before textual's imports; what the console imported is frozen below
    from perfconsole.core.launch import processes, warm
    from perfconsole.tui.app import PerfConsole
    from perfconsole.tui import exit_guard

    from perfconsole.core.cli.executor import executor_from_args

    executor = executor_from_args(args, device=spec.device)
    app = PerfConsole(spec, start=args.start, ascii_only=args.ascii)
    gc_control.settle()  # what is imported lives as long as the console (core/measure/gc_control.py)
    app.executor = executor
    app.install_signals = True
    # Runs fork from a process that has imported torch (core/launch/warm.py): the console's own, or the one its
    # server keeps for every tab (`perfconsole serve`, tui/serve.py).
    app.warm_start = not os.environ.get(warm.SHARED_VAR)
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
        if code is None:  # textual's run() gives the exit's result; a console that failed has none, its code is 1
            code = app.return_code
    finally:
        processes.kill_all()
        # Leaving may stall too (a thread that will not end): the guard bounds it, keeping the code.
        guard.trip(int(code or 0) if app.stop_signal is None else 128 + app.stop_signal)
    say_kept(app.kept)
    # A stopped console exits 128 + the signal, also when something failed while it stopped (textual then
    # returns 1 and prints the traceback): the caller learns that the signal ended it.
    return int(code or 0) if app.stop_signal is None else 128 + app.stop_signal


def say_kept(files: list[Path]) -> None:
    """The exit line: how many runs leaving saved, and where (nothing when every run had a file already)."""
    if not files:
        return
    folders = ", ".join(sorted({str(f.parent) for f in files}))
    runs = "1 run" if len(files) == 1 else f"{len(files)} runs"
    with contextlib.suppress(OSError, ValueError):  # the terminal may be gone (a hang-up)
        print(f"perfconsole: kept {runs} not saved before in {folders}; the console lists them in Runs",
              file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # a console concern (textual), so it is dispatched here, not by core's parser
        from perfconsole.tui import serve

        return serve.main(args[1:], console_options)
    return cli.main(args, console=(console_options, open_console))


if __name__ == "__main__":
    sys.exit(main())

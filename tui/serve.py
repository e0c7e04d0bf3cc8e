"""`perfconsole serve`: the console in a browser, through textual-serve.

Each browser tab gets its own console process, started from a command line that textual-serve runs
through /bin/sh; that line is built here with shlex.join from the flags the user passed, so nothing
typed on the command line is read by the shell. The server keeps one warm process (core.launch.warm), from
which every tab's runs fork. The server listens on the loopback interface unless
--allow-remote is given, and every request needs the token printed at start (tui/serve_auth.py):
whoever can use the console can launch runs and read and write files as the user who started it.
"""
from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import shlex
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import aiohttp_jinja2
import jinja2
import psutil
from aiohttp import web
from textual_serve.server import Server

from perfconsole.core import paths
from perfconsole.core.cli import main as cli
from perfconsole.core.launch import warm
from perfconsole.core.launch.processes import STOP_SIGNALS
from perfconsole.core.settings import SpecError
from perfconsole.tui import serve_auth

DEFAULT_PORT = 8000
WILDCARDS = ("", "0.0.0.0", "::")
SESSION_GRACE_S = 10.0   # how long a console may take to end its runs and exit once asked
KILL_GRACE_S = 3.0       # then SIGTERM, and SIGKILL after this
# textual-serve's page fetches Roboto Mono from fonts.googleapis.com, which GPU nodes often cannot reach
# (and which would learn of every page load). textual-serve's wheel ships the same font (Apache 2.0,
# its licence is in the font's name table), served from its /static route: the page gets it from there.
FONT_LINK = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>", re.S)
LOCAL_FONT = """<style>
      @font-face { font-family: "Roboto Mono"; font-style: normal; font-weight: 100 700;
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf") format("truetype"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic; font-weight: 100 700;
        src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf") format("truetype"); }
    </style>"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump, like the other commands
        self.exit(cli.EXIT_USAGE, f"{self.prog}: error: {message}\n")


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return port


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; a non-loopback address needs --allow-remote (default: 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT, help=f"1-65535 (default: {DEFAULT_PORT})")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host (plain HTTP: the token crosses the network unencrypted)")
    p.add_argument("--token", default=None, metavar="TOKEN",
                   help=f"the secret every request needs (default: ${serve_auth.TOKEN_ENV} if set, which keeps it "
                        "out of `ps`, else a random one, printed in the URL); --token '' serves without one, "
                        "loopback only: every account on this machine can then use the console as you")
    p.add_argument("--public-url", default=None, metavar="URL",
                   help="the address browsers use to reach the server (behind a proxy or an SSH tunnel "
                        "on another port); default: http://HOST:PORT")


def build_parser(console_options: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """serve's own flags, plus the console's flags for --help and for checking them before serving."""
    parser = _Parser(prog="perfconsole serve", allow_abbrev=False,
                     description="Serve the console in a browser: each browser tab runs its own console "
                                 "on this machine. The console flags pre-fill every tab's launch form.")
    add_serve_arguments(parser.add_argument_group("serve"))
    console_options(parser)
    return parser


def split_argv(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """serve's flags, and the rest of argv as given: the console flags each tab's console gets."""
    only_serve = _Parser(prog="perfconsole serve", allow_abbrev=False, add_help=False)
    add_serve_arguments(only_serve)
    return only_serve.parse_known_args(argv)


def is_loopback(host: str) -> bool:
    """True when every address `host` names is a loopback one; a name that does not resolve is bad input."""
    if host in WILDCARDS:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError) as exc:
        raise cli.UsageError(f"--host {host}: cannot resolve it ({exc})") from exc
    return bool(infos) and all(ipaddress.ip_address(str(i[4][0]).split("%")[0]).is_loopback for i in infos)


def console_command(console_argv: list[str]) -> str:
    """The line textual-serve hands to /bin/sh for each tab: `exec` replaces the shell with the console,
    so the server's child is the console itself and a signal to it reaches the console."""
    return "exec " + shlex.join([sys.executable, "-m", "perfconsole.tui.main", *console_argv])


def public_url(host: str, port: int) -> str:
    if host in WILDCARDS:
        host = socket.gethostname()  # 0.0.0.0 is no address a browser elsewhere can use
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal in a URL
    return f"http://{host}:{port}"


def local_font_page(templates: Path) -> str:
    """textual-serve's page with its font link replaced by @font-face rules for its own static copy."""
    return FONT_LINK.sub(LOCAL_FONT, (templates / "app_index.html").read_text(encoding="utf-8"))


class ConsoleServer(Server):
    """textual-serve's server, which on shutdown asks every tab's console to quit (each ends its runs)
    and then ends whatever of its children is left, so stopping the server leaves no process behind.
    Its app gets the token check as a middleware and a page whose font comes from this server."""

    def __init__(self, command: str, host: str, port: int, url: str, token: str) -> None:
        super().__init__(command, host=host, port=port, title="perfconsole", public_url=url)
        self.guard = serve_auth.TokenGuard(token, port, url)
        self._sessions: set[asyncio.Task] = set()
        self.stopped_by: signal.Signals | None = None

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": local_font_page(self.templates_path)}))
        app.middlewares.append(self.guard.middleware)  # before the app starts, when its list freezes
        return app

    def initialize_logging(self) -> None:
        serve_auth.plain_logging()

    async def on_startup(self, app: web.Application) -> None:
        pass  # textual-serve's banner; the line that says where to go is printed once the port is bound

    def _listening(self, *_: object) -> None:
        # The port is bound: one warm process for every tab's console (core.launch.warm), started here, on the main
        # thread (its parent-death signal follows the thread that started it). A tab imports no torch of its own.
        own = warm.start_own()
        if own is not None:
            os.environ[warm.SHARED_VAR] = warm.shared_value(own)
        url = serve_auth.url_with_token(self.public_url, self.guard.token)
        print(f"perfconsole: serving the console on {url} (one console per browser tab; "
              "Ctrl+C stops the server and every console)", flush=True)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        task = asyncio.current_task()
        assert task is not None
        self._sessions.add(task)
        try:
            return await super().handle_websocket(request)
        finally:
            self._sessions.discard(task)

    async def on_shutdown(self, app: web.Application) -> None:
        # aiohttp has closed the connections by now, so each session is sending its console textual's
        # quit and waiting for it to exit (the console ends its runs as it goes). A session still open
        # after the grace is cancelled, and end_children() deals with what it leaves.
        sessions = list(self._sessions)
        if sessions:
            _, pending = await asyncio.wait(sessions, timeout=SESSION_GRACE_S)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=KILL_GRACE_S)
        end_children()

    def serve(self, debug: bool = False) -> None:
        """Server.serve, with SIGHUP (a dropped SSH session) stopping it too, and the signal kept so the
        exit code says which one it was, as the other commands' codes do."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._stop_on, sig)
        # _make_app is textual-serve's own app (its routes and hooks); only the running is done here.
        web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                    print=self._listening, access_log_class=serve_auth.ShortAccessLog)

    def _stop_on(self, sig: signal.Signals) -> None:
        self.stopped_by = sig
        self.request_exit()


def end_children() -> None:
    """SIGTERM, then SIGKILL, to every process this server started that is still there (a console that
    did not answer quit, and its runs' workers)."""
    children = psutil.Process().children(recursive=True)
    for p in children:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(children, timeout=KILL_GRACE_S)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def main(argv: list[str], console_options: Callable[[argparse.ArgumentParser], None]) -> int:
    args = build_parser(console_options).parse_args(argv)  # every flag checked, serve's and the console's
    serve_args, console_argv = split_argv(argv)
    token = serve_auth.choose_token(serve_args.token, dict(os.environ))
    os.environ.pop(serve_auth.TOKEN_ENV, None)  # the consoles have no use for it
    try:
        cli.spec_from_args(args)  # a bad pre-fill is one line now, not an error in every browser tab
        paths.check_data_dir()  # the warm process the server keeps for its tabs lives there
        if not is_loopback(serve_args.host):
            if not serve_args.allow_remote:
                raise cli.UsageError(f"--host {serve_args.host} is not a loopback address; anyone who can reach "
                                     "it could launch runs on this machine (add --allow-remote to serve it anyway)")
            if not token:
                raise cli.UsageError("--token '' with --allow-remote: anyone who can reach the port could launch "
                                     "runs on this machine; give a token, or serve on loopback")
            print(f"perfconsole: warning: serving on {serve_args.host}:{serve_args.port} over plain HTTP: the token "
                  "crosses the network unencrypted (an SSH tunnel to a loopback port is safer)",
                  file=sys.stderr, flush=True)
        elif not token:
            print("perfconsole: warning: --token '': no token, so every account on this machine can open the "
                  "console and launch runs, read and write files as you", file=sys.stderr, flush=True)
    except (SpecError, cli.UsageError, paths.PathError) as exc:
        print(f"perfconsole: error: {exc}", file=sys.stderr)
        return cli.EXIT_USAGE
    # textual-serve appends "/ws" and "/static/..." to this URL, so a trailing slash would double.
    url = (serve_args.public_url or public_url(serve_args.host, serve_args.port)).rstrip("/")
    server = ConsoleServer(console_command(console_argv), serve_args.host, serve_args.port, url, token)
    try:
        server.serve()
    except KeyboardInterrupt:  # Ctrl-C before the server's own handlers are in place
        return cli.EXIT_CANCELLED
    except OSError as exc:  # the port is taken, or the address is not this machine's
        print(f"perfconsole: error: --port {serve_args.port}: cannot listen on {serve_args.host} "
              f"({exc.strerror or exc})", file=sys.stderr)
        return cli.EXIT_USAGE
    finally:
        warm.stop_own()  # started once the port was bound (ConsoleServer._listening)
    # 128 + the signal, as the other commands exit: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP.
    return 128 + server.stopped_by if server.stopped_by else cli.EXIT_OK

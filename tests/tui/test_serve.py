"""`perfconsole serve` for real: the server in a subprocess, the console in headless Chromium, keys in,
the terminal's text out, then the server stopped and every process it started checked gone. Skips
where chromium or playwright is missing (CI installs both in .ci/run). Who may connect (the token)
is tests/tui/test_serve_auth.py.
"""
from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
from helpers import WARM_SERVER
from serve_helpers import (CAPTURE_TERMINAL, MARKER, PREFILL, free_port, launch_chromium, marked_processes,
                           needs_chromium, needs_playwright, serve, stop, sync_playwright, wait_for_port, wait_for_text)


@pytest.mark.slow
@needs_chromium
@needs_playwright
@pytest.mark.parametrize("group", [True, False], ids=["sigterm-to-group", "sigterm-to-server"])
def test_the_console_in_a_browser_runs_and_stopping_the_server_leaves_no_process(group, tmp_path):
    log = tmp_path / "serve.log"
    tag = uuid.uuid4().hex
    port = free_port()
    # Each step sleeps 0.7 s first, so the second run below is still measuring when the server stops.
    # The test's own data folder (tests/conftest.py), which holds the measured peaks: no run measures them.
    env = {**os.environ, MARKER: tag, "PERFCONSOLE_FAULT": "slow:700", "PERFCONSOLE_TOKEN": tag}
    server = serve(["--port", str(port), *PREFILL], env, log)
    try:
        wait_for_port(port, server)
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.add_init_script(CAPTURE_TERMINAL)
                page.goto(f"http://127.0.0.1:{port}/?token={tag}")
                form = wait_for_text(page, "1 Launch", "Run", "device", timeout=60)
                assert "tiny" in form and "train" in form and "cpu" in form, form
                consoles = [p for p in marked_processes(tag) if p.pid != server.pid]
                assert any("perfconsole.tui.main" in " ".join(p.cmdline()) for p in consoles), consoles

                page.locator(".xterm-screen").click()  # keys go to the terminal
                page.keyboard.press("Control+r")
                live = wait_for_text(page, "finished", "3/3 measured steps", timeout=120)
                assert "tiny ctx32 b2 fp32 train" in live, live
                assert "tokens/s" in live, live

                # A second run that is still measuring when the server stops: its worker must go too.
                page.keyboard.press("1")
                wait_for_text(page, "Queue fp32/bf16/fp16")
                page.keyboard.press("Control+r")
                wait_for_text(page, "x cancels", timeout=60)
                workers = [p for p in marked_processes(tag) if "perfconsole.core.measure.worker" in " ".join(p.cmdline())]
                assert workers, "the second run's worker is not running"
                # It forked from the server's warm process, which every tab shares: no tab keeps one of its own.
                warms = [p for p in marked_processes(tag) if WARM_SERVER in " ".join(p.cmdline())]
                assert [p.ppid() for p in warms] == [server.pid], [(p.pid, p.ppid()) for p in warms]
                assert [p.ppid() for p in workers] == [warms[0].pid], workers
            finally:
                browser.close()
    finally:
        stop(server, group)
    assert server.returncode == 128 + signal.SIGTERM, log.read_text()
    assert f"serving the console on http://127.0.0.1:{port}/?token={tag}" in log.read_text()
    deadline = time.monotonic() + 15
    while marked_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = marked_processes(tag)
    assert not left, [(p.pid, p.cmdline()) for p in left]


def run_serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "serve", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("args, words", [
    (["--host", "0.0.0.0"], "perfconsole: error: --host 0.0.0.0 is not a loopback address"),
    (["--host", "::"], "add --allow-remote"),
    (["--port", "0"], "1-65535"),
    (["--port", "65536"], "1-65535"),
    (["--port", "http"], "1-65535"),
    (["--ctx", "0"], "perfconsole: error: ctx"),
    (["run"], "unrecognized arguments: run"),
])
def test_bad_input_is_one_line_exit_2(args, words):
    out = run_serve(*args)
    assert out.returncode == 2, out
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert words in out.stderr and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_a_taken_port_is_one_line_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        out = run_serve("--port", str(s.getsockname()[1]))
    assert out.returncode == 2, out
    assert out.stderr.startswith("perfconsole: error: --port ") and len(out.stderr.strip().splitlines()) == 1


def test_a_remote_address_with_allow_remote_serves_and_warns(tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    server = serve(["--host", "0.0.0.0", "--port", str(port), "--allow-remote"], dict(os.environ), log)
    try:
        wait_for_port(port, server)
        end = time.monotonic() + 10
        while "serving the console" not in log.read_text() and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        stop(server, group=True)
    text = log.read_text()
    assert ("perfconsole: warning: serving on 0.0.0.0:" in text
            and "the token crosses the network unencrypted" in text), text
    assert "serving the console on http://" in text


def test_the_console_command_is_quoted_for_the_shell():
    from perfconsole.tui import serve as serve_module

    argv = ["--size", "tiny", "--seed", "1; touch /tmp/x", "--ascii"]
    line = serve_module.console_command(argv)
    assert shlex.split(line) == ["exec", sys.executable, "-m", "perfconsole.tui.main", *argv]


def run_perfconsole(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfconsole.tui.main", *args], capture_output=True, text=True,
                          timeout=60)


def test_perfconsole_help_lists_serve_among_the_commands():
    out = run_perfconsole("--help")
    assert out.returncode == 0, out
    commands = out.stdout[out.stdout.index("COMMAND\n"):out.stdout.index("options:")]
    # a command's line is indented by 4; its help's continuation lines by more
    listed = [line.split()[0] for line in commands.splitlines() if line[:4] == "    " and line[4:5] not in " "]
    assert listed[0] == "run" and listed[-1] == "serve", commands


def test_an_unknown_command_names_serve_among_the_choices():
    out = run_perfconsole("bogus")
    assert out.returncode == 2 and out.stdout == "", out
    assert "invalid choice: 'bogus'" in out.stderr and "'kernels', 'scale', 'gate', 'timeline', 'serve')" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_serve_after_console_flags_is_one_line_exit_2():
    out = run_perfconsole("--ascii", "serve", "--port", "9000")
    assert out.returncode == 2, out
    # core's parser refuses any flag before a command, serve's included, before serve's stand-in runs
    assert out.stderr == ("perfconsole: error: --ascii: given before 'serve', the console's flags, which 'serve' "
                          "never sees; give serve's flags after it\n")

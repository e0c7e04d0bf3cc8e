"""`perfconsole serve` for real: the server in a subprocess, the console in headless Chromium, keys in,
the terminal's text out, then the server stopped and every process it started checked gone.

The page draws the terminal with xterm.js on a canvas, so the text is read from xterm's own screen
buffer: a script that runs before the page's captures the Terminal object when textual-serve's page
stores it (`this.terminal = new Terminal(...)`), and the test reads `terminal.buffer.active` line by
line, the very characters the canvas shows. Skips where chromium or playwright is missing (CI
installs both in .ci/run).
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

CHROMIUM = shutil.which("chromium")
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the dev extra brings it
    sync_playwright = None

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
needs_playwright = pytest.mark.skipif(sync_playwright is None,
                                      reason="playwright is not installed (pip install -e '.[dev]')")
PREFILL = ["--size", "tiny", "--device", "cpu", "--ctx", "32", "--batch", "2", "--warmup", "1", "--steps", "3",
           "--mode", "train"]
MARKER = "PERFCONSOLE_SERVE_TEST"

# Keeps the Terminal that textual-serve's page assigns to `this.terminal`, as window.__xterm.
CAPTURE_TERMINAL = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (value && value.buffer && value.buffer.active) window.__xterm = value;
  },
});
"""
READ_SCREEN = """() => {
  const t = window.__xterm;
  if (!t) return null;
  const b = t.buffer.active, lines = [];
  for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
  return lines.join("\\n");
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """The server in its own process group; its output goes to a file, which no full pipe can block."""
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "perfconsole.tui.main", "serve", *args], env=env,
                                start_new_session=True, stdout=out, stderr=subprocess.STDOUT)


def wait_for_port(port: int, server: subprocess.Popen, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.poll() is not None:
            raise AssertionError(f"the server exited with {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port} after {timeout} s")


def screen(page: Page) -> str:
    return page.evaluate(READ_SCREEN) or ""


def wait_for_text(page: Page, *texts: str, timeout: float = 90) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        text = screen(page)
        if all(t in text for t in texts):
            return text
        time.sleep(0.25)
    if page.evaluate(READ_SCREEN) is None:
        raise AssertionError("the page never stored its xterm Terminal as `this.terminal` (textual-serve changed?)")
    raise AssertionError(f"{texts!r} never appeared; the page shows:\n{screen(page)}")


def marked_processes(tag: str) -> list[psutil.Process]:
    """Every live process whose environment carries this test's marker: the server, each tab's
    console and the consoles' run workers (they inherit the environment)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARKER) == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def stop(server: subprocess.Popen, group: bool) -> None:
    """SIGTERM to the server's process group (a terminal, systemd, a batch scheduler), or to the server
    alone (`kill PID`), when the consoles hear of it only from the server."""
    try:
        if group:
            os.killpg(server.pid, signal.SIGTERM)
        else:
            server.terminate()
    except ProcessLookupError:
        pass
    server.wait(timeout=40)


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
    env = {**os.environ, MARKER: tag, "PERFCONSOLE_FAULT": "slow:700"}
    server = serve(["--port", str(port), *PREFILL], env, log)
    try:
        wait_for_port(port, server)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.add_init_script(CAPTURE_TERMINAL)
                page.goto(f"http://127.0.0.1:{port}/")
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
            finally:
                browser.close()
    finally:
        stop(server, group)
    assert server.returncode == 128 + signal.SIGTERM, log.read_text()
    assert f"serving the console on http://127.0.0.1:{port}" in log.read_text()
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
            and "anyone who can reach this port can launch runs on this machine" in text), text
    assert "serving the console on http://" in text


def test_the_console_command_is_quoted_for_the_shell():
    from perfconsole.tui import serve as serve_module

    argv = ["--size", "tiny", "--seed", "1; touch /tmp/x", "--ascii"]
    line = serve_module.console_command(argv)
    assert shlex.split(line) == ["exec", sys.executable, "-m", "perfconsole.tui.main", *argv]


def test_perfconsole_help_names_serve():
    out = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "perfconsole serve" in out.stdout, out

"""What the serve tests share: the server in a subprocess, its port and log, and headless Chromium
reading the console's screen out of xterm.js.

The page draws the terminal with xterm.js on a canvas, so the text is read from xterm's own screen
buffer: a script that runs before the page's captures the Terminal object when textual-serve's page
stores it (`this.terminal = new Terminal(...)`), and the test reads `terminal.buffer.active` line by
line, the very characters the canvas shows.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

CHROMIUM = shutil.which("chromium")
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the dev extra brings it
    sync_playwright = None  # type: ignore[assignment]

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


def wait_for_log(log: Path, text: str, timeout: float = 15) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in log.read_text():
            return log.read_text()
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared in the server's output:\n{log.read_text()}")


# Headless, and quiet: no background traffic of the browser's own, so every request seen is the page's.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def launch_chromium(pw):  # type: ignore[no-untyped-def]
    return pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


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




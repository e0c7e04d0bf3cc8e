"""Chaos for `perfconsole serve`: the server with one or two browser tabs (headless Chromium through
playwright), tabs closed at random moments (before the console shows, idle, mid-run) and the server
stopped at a random moment (SIGTERM, SIGINT or SIGHUP, to the server alone or to its process group);
then no process of it may be left (server, consoles, their warm processes, workers: found by an
environment marker unique to the trial), and the server exits 128 + the signal. The page's address is the one the server prints
(with whatever token it carries), never one built here.

    python scripts/chaos_serve.py --trials 20 --seed 7
    python scripts/chaos_serve.py --seed 7 --only 3          # replay one trial

tests/tui/test_chaos_serve.py runs a few trials in the normal suite.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
MARKER = "PERFCONSOLE_CHAOS_SERVE"
PREFILL = ["--size", "tiny", "--device", "cpu", "--ctx", "32", "--batch", "2", "--warmup", "1", "--steps", "400",
           "--mode", "train"]
URL = re.compile(r"serving the console on (\S+)")
LEFT_S = 20.0          # the server gives its consoles 10 s to quit, then SIGTERM and SIGKILL
WARM = "perfconsole.core.launch.warm_server"   # in the command line of the server's warm process
TAB_ACTIONS = ("close-early", "close-idle", "close-running", "keep", "keep-running")
STOPS = ("SIGTERM", "SIGINT", "SIGHUP")
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


@dataclass(frozen=True)
class Trial:
    seed: int
    index: int
    tabs: tuple[tuple[str, float], ...]   # (action, delay in s) per tab
    stop: str
    group: bool                          # the signal to the server's process group, else the server alone
    stop_delay: float

    @classmethod
    def draw(cls, seed: int, index: int) -> Trial:
        rng = random.Random(f"serve:{seed}:{index}")
        tabs = tuple((rng.choice(TAB_ACTIONS), round(rng.uniform(0, 3.0), 3)) for _ in range(rng.choice((1, 2))))
        return cls(seed, index, tabs, rng.choice(STOPS), rng.random() < 0.5, round(rng.uniform(0, 2.0), 3))

    def __str__(self) -> str:
        tabs = ", ".join(f"{a} + {d:.2f} s" for a, d in self.tabs)
        return (f"seed {self.seed} trial {self.index}: tabs [{tabs}], then {self.stop} to the "
                f"{'group' if self.group else 'server'} + {self.stop_delay:.2f} s")

    def replay(self) -> str:
        return f"python scripts/chaos_serve.py --seed {self.seed} --only {self.index}"


@dataclass
class Outcome:
    trial: Trial
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    warm_at_stop: int = 0   # warm processes (the server's, shared by its tabs: core.launch.warm) as the server was stopped


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marked(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARKER) == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _cmdline_has(p: psutil.Process, word: str) -> bool:
    try:
        return word in p.cmdline()
    except psutil.Error:
        return False


def printed_url(log: Path, server: subprocess.Popen, timeout: float = 60) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = URL.search(log.read_text(errors="replace"))
        if m:
            return m.group(1)
        if server.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"the server printed no address:\n{log.read_text(errors='replace')}")


def wait_text(page, text: str, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if text in (page.evaluate(READ_SCREEN) or ""):
                return True
        except Exception:  # the page navigated or closed
            return False
        time.sleep(0.2)
    return False


def _tab(context, url: str, action: str, delay: float) -> object | None:
    """Open a tab and bring it to its moment; returns the page if it stays open."""
    page = context.new_page()
    page.add_init_script(CAPTURE_TERMINAL)
    page.goto(url, wait_until="commit")
    if action == "close-early":
        time.sleep(min(delay, 1.5))
        page.close()
        return None
    if not wait_text(page, "Launch", 90):
        return page
    if action in ("close-running", "keep-running"):
        page.locator(".xterm-screen").click()
        page.keyboard.press("Control+r")
    time.sleep(delay)
    if action.startswith("close"):
        page.close()
        return None
    return page


def run_trial(trial: Trial, browser, root: Path) -> Outcome:
    start = time.monotonic()
    out = Outcome(trial)
    work = Path(tempfile.mkdtemp(prefix=f"serve{trial.index}-", dir=root))
    tag = uuid.uuid4().hex
    env = {**os.environ, MARKER: tag, "PERFCONSOLE_DATA_DIR": str(work / "data"), "PERFCONSOLE_FAULT": "slow:40"}
    log = work / "serve.log"
    with log.open("w") as f:
        server = subprocess.Popen([sys.executable, "-m", "perfconsole.tui.main", "serve", "--port", str(free_port()),
                                   *PREFILL], env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    context = None
    try:
        url = printed_url(log, server)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        for action, delay in trial.tabs:
            _tab(context, url, action, delay)
        time.sleep(trial.stop_delay)
        out.warm_at_stop = sum(1 for p in marked(tag) if _cmdline_has(p, WARM))
        sig = getattr(signal, trial.stop)
        try:
            os.killpg(server.pid, sig) if trial.group else server.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            code = server.wait(timeout=LEFT_S + 10)
            if code != 128 + sig:
                out.problems.append(f"the server exited {code}, not {128 + sig}")
        except subprocess.TimeoutExpired:
            out.problems.append("the server did not exit")
        end = time.monotonic() + LEFT_S
        while (left := marked(tag)) and time.monotonic() < end:
            time.sleep(0.2)
        if left:
            out.problems.append(f"left running after {LEFT_S:.0f} s: " + "; ".join(
                f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in left if p.is_running()))
    except Exception as exc:  # the trial could not be carried out: a failure that names its cause
        out.problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        if context is not None:
            context.close()
        for p in marked(tag):
            try:
                p.kill()
            except psutil.Error:
                pass
        if server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)
    out.seconds = time.monotonic() - start
    return out


def run(seed: int, indices: list[int], report=print) -> list[Outcome]:
    from playwright.sync_api import sync_playwright

    root = Path(tempfile.mkdtemp(prefix="perfconsole-chaos-serve-"))
    outcomes = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                for i in indices:
                    o = run_trial(Trial.draw(seed, i), browser, root)
                    outcomes.append(o)
                    report(f"{'FAIL' if o.problems else 'ok  '} {o.trial} ({o.seconds:.1f} s)"
                           + "".join(f"\n     {p}" for p in o.problems))
            finally:
                browser.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=int(os.environ.get("PERFCONSOLE_CHAOS_SERVE_TRIALS", "20")))
    p.add_argument("--seed", type=int, default=int(os.environ.get("PERFCONSOLE_CHAOS_SEED", "0") or 0))
    p.add_argument("--only", default=None, help="replay these trials of the seed (comma-separated indices)")
    args = p.parse_args(argv)
    indices = [int(i) for i in args.only.split(",")] if args.only else list(range(args.trials))
    t0 = time.monotonic()
    outcomes = run(args.seed, indices)
    failed = [o for o in outcomes if o.problems]
    leftovers = sum(1 for o in failed if any(x.startswith("left running") for x in o.problems))
    print(f"seed {args.seed}: {len(outcomes)} serve trials, {len(failed)} failed, {leftovers} with processes left, "
          f"{time.monotonic() - t0:.0f} s")
    for o in failed:
        print(f"  {o.trial}: {'; '.join(o.problems)}\n    replay: {o.trial.replay()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

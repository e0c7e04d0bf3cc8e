"""What many test files need, in one place: the checkout's root and fixtures, the CLI run as a child process,
and the tiny CPU model's spec (each file states what it changes of it)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import psutil

from perfconsole.core.launch.warm import SERVER as WARM_SERVER
from perfconsole.core.settings import RunSpec

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
# The console script's module: every sub-command, and the console with none.
PC = [sys.executable, "-m", "perfconsole.tui.main"]
# A tiny CPU run takes seconds; a loaded 2-core CI machine running four test workers has taken minutes.
CLI_TIMEOUT = 300


def point_at_warm() -> None:
    """The data folder of this process's environment names its warm process, as a console up on that folder does:
    a CLI started on it forks its runs from it (tests/conftest.py's `_warm_launches`). Named once it serves, as a
    console's own names it once bound: a CLI that found a warm process still importing (no socket yet) ran cold."""
    from perfconsole.core.launch import warm

    own = warm._own
    if own is None or own.proc is None or own.proc.poll() is not None or own.wait_ready() is not None:
        return
    pointer = warm.pointer_dir()
    pointer.mkdir(mode=0o700, parents=True, exist_ok=True)
    (pointer / str(os.getpid())).write_text(str(own.socket))


def script_module(name: str) -> ModuleType:
    """scripts/NAME.py loaded as the module NAME (the scripts folder is no package), once a process."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def pc(*args: str, timeout: float = CLI_TIMEOUT, **kw) -> subprocess.CompletedProcess:
    """`perfconsole ARGS...` as a child process, its output captured as text."""
    return subprocess.run([*PC, *args], capture_output=True, text=True, timeout=timeout, **kw)


# The tiny model on the CPU: a run of seconds. As flags and as a spec.
TINY_ARGS = ["--size", "tiny", "--device", "cpu", "--ctx", "16", "--batch", "2"]
TINY = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=3, mode="train")

# Specs that validate, each with other rules between settings in play: what the launch form offers beside
# them and what a ladder climbs from them must agree with validation (core.settings.rules).
RULE_BASES = {"cpu tiny": TINY, "ddp x2": TINY.with_(nproc=2, parallel="ddp"),
              "fsdp x2": TINY.with_(nproc=2, parallel="fsdp"), "bf16": TINY.with_(precision="bf16"),
              "fwd": TINY.with_(mode="fwd"), "cuda bf16 compile": TINY.with_(device="cuda", precision="bf16", compile=True),
              "hf:llama": TINY.with_(model="hf:llama"),
              "ddp compiled autograd": TINY.with_(nproc=2, parallel="ddp", compile=True, optimize_ddp="python_reducer")}


def stream(launch, record, seen: list | None = None):
    """Every event of a started launch applied to `record` (and kept in `seen`); returns the record."""
    for event in launch.events():
        record.apply(event)
        if seen is not None:
            seen.append(event)
    return record


def run_workers() -> list[psutil.Process]:
    """This process's workers: those running, and those ending or ended that their launch has not released yet,
    whose command line can no longer be read: children of this process (cold workers) or of its warm process
    (forked ones, which the warm process keeps as zombies until their launch lets go). The warm process itself,
    which serves on, is none; a child it has just forked still has its command line, and is one."""
    me = psutil.Process()
    kids = me.children(recursive=True)
    servers = _warm_servers(me, kids)
    out = []
    for p in kids:
        if p.pid in servers:
            continue
        try:
            line = [] if p.status() == psutil.STATUS_ZOMBIE else p.cmdline()
            if (not line and p.ppid() in servers | {me.pid}) or any("perfconsole.core." in part for part in line):
                out.append(p)
        except psutil.Error:  # gone between the listing and the read
            continue
    return out


def _warm_servers(me: psutil.Process, kids: list[psutil.Process]) -> set[int]:
    servers = set()
    for p in kids:
        try:
            if p.ppid() == me.pid and WARM_SERVER in p.cmdline():
                servers.add(p.pid)
        except psutil.Error:
            continue
    return servers


def gone_or_zombie(pid: int) -> bool:
    """Whether a process has ended: gone, or a zombie its parent has not reaped yet. A forked worker stays its warm
    process's zombie until its launch lets go, then is reaped at any moment (so not pid_exists, then Process)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def running(p: psutil.Process) -> bool:
    """Whether `p` (the process it named, not a later one given its pid) still runs: not ended, not a zombie. One
    that ends between the two looks is not running (the clean-clone CI of a055331 met a rank gone between them)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants() -> list[psutil.Process]:
    """Every process this one started and what they started, but its warm process, which serves on past any run
    (core.launch.warm); what the warm process forked is among them."""
    me = psutil.Process()
    kids = me.children(recursive=True)
    servers = _warm_servers(me, kids)
    return [p for p in kids if p.pid not in servers]


def workers_left(timeout: float = 10.0) -> list[psutil.Process]:
    """The run workers still there once `timeout` seconds have passed, or none as soon as none is: a launch that has
    ended lets go of its worker, and the warm process reaps a forked one a moment later."""
    deadline = time.monotonic() + timeout
    while (left := run_workers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left

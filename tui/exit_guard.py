"""The console never outlives its terminal: a stop signal (SIGHUP, SIGTERM, SIGINT), a dead terminal
(EIO on output, stdin no longer a tty) or a dead parent (the tmux server, the serve process) starts
an orderly stop in the app (end the runs, save what they measured, exit 128 + the signal), and a
watchdog thread that, should the app still be there `GRACE_S` later whatever Textual is doing,
kills every child process group, saves the measured runs itself and calls os._exit.

Why the watchdog and the driver below exist: with textual 8.2 a console whose tmux session was
killed just after its first frame hung for good, ignoring SIGTERM. The kernel hangs up a terminal
with SIGHUP *and* SIGCONT to the session leader; textual's LinuxDriver takes any SIGCONT as the
end of a ctrl+z suspend and starts application mode a second time, with a second writer thread that
dies on its first write to the dead pty (EIO), leaving the first one orphaned. Its queue holds 30
writes; the 31st, made by App._shutdown -> disable_input -> _disable_mouse_support, blocks
Queue.put forever on the main thread, so the asyncio loop, and with it the SIGTERM handler, never
runs again. Minimal reproduction, with no perfconsole in it (2 of 3 tries hang):

    # mini.py
    import asyncio, signal
    from textual.app import App
    from textual.widgets import Log
    class A(App):
        def compose(self): yield Log()
        def on_mount(self):
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.exit)
            self.set_interval(0.01, lambda: self.query_one(Log).write_line("x"))
    A().run()

    tmux new-session -d -s t python mini.py; sleep 3; tmux kill-session -t t; sleep 3
    pgrep -f mini.py   # still there: py-spy shows the main thread in Queue.put under App._shutdown

The writer thread dies on EIO without any SIGCONT too (an SSH drop), after which 30 more writes
block the same way. ConsoleDriver fixes both where they start: it resumes only after its own
suspend, and its output swallows the terminal's errors (and reports the terminal gone) instead of
killing the writer thread. The watchdog stays as the last line of defence.
"""
from __future__ import annotations

import contextlib
import copy
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import psutil
from textual.drivers.linux_driver import LinuxDriver

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.launch import processes
from perfconsole.core.paths import data_dir, safe_name
from perfconsole.tui.session import Session

GRACE_S = 3.0          # the orderly stop takes well under a second; then the watchdog acts
RESCUE_S = 1.0         # how long the watchdog waits for its own save before exiting anyway
POLL_S = 0.5           # how often the terminal and the parent are checked
STOP_SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
HANG_UP = 128 + signal.SIGHUP


class ExitGuard:
    """Armed once per console process. `trip(code)` may be called from any thread or a signal handler:
    it takes no lock (one os.write to a pipe the watchdog thread is blocked reading)."""

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s
        self.code: int | None = None
        self.rescue: Callable[[], object] | None = None    # saves the measured runs (set by the app)
        self.on_lost: Callable[[int], None] | None = None  # asks the app to stop, with a signal number
        self._read, self._write = os.pipe()
        self._armed = False

    def arm(self, watch_tty: int | None = None) -> None:
        """Start the watchdog, and a monitor of the terminal `watch_tty` (a fd) and of the parent."""
        if self._armed:
            return
        self._armed = True
        threading.Thread(target=self._watchdog, name="exit-guard", daemon=True).start()
        threading.Thread(target=self._monitor, args=(watch_tty, os.getppid()), name="exit-guard-monitor",
                         daemon=True).start()

    def trip(self, code: int) -> None:
        if self.code is None:
            self.code = code
            with contextlib.suppress(OSError):
                os.write(self._write, b"x")

    def lost(self, signum: int = signal.SIGHUP) -> None:
        """The terminal or the parent is gone: stop as on that signal."""
        self.trip(128 + signum)
        if self.on_lost is not None:
            with contextlib.suppress(Exception):
                self.on_lost(signum)

    def _monitor(self, tty: int | None, ppid: int) -> None:
        while self.code is None:
            time.sleep(POLL_S)
            if os.getppid() != ppid or (tty is not None and not os.isatty(tty)):
                self.lost()
                return

    def _watchdog(self) -> None:
        os.read(self._read, 1)
        time.sleep(self.grace_s)
        kill_children()
        if self.rescue is not None:
            saver = threading.Thread(target=self._rescue, name="exit-guard-save", daemon=True)
            saver.start()
            saver.join(RESCUE_S)
            kill_children()  # nothing the save did may outlive us either
        os._exit(self.code if self.code is not None else HANG_UP)

    def _rescue(self) -> None:
        with contextlib.suppress(Exception):
            assert self.rescue is not None
            self.rescue()


def descendants(pid: int) -> list[int]:
    """pid's children, theirs and so on, from /proc/PID/task/TID/children: no scan of every process on a
    loaded machine, where the watchdog must be quick (psutil's scan where the kernel lacks the file)."""
    out, todo = [], [pid]
    try:
        while todo:
            p = todo.pop()
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError):
                    kids = [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
                    out += kids
                    todo += kids
    except FileNotFoundError:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)] if pid == os.getpid() else out
    return out


def kill_children() -> None:
    """SIGKILL to every known worker's process group, then to every descendant still there."""
    processes.kill_all()
    with contextlib.suppress(psutil.Error, OSError):
        for child in descendants(os.getpid()):
            with contextlib.suppress(OSError):
                if os.getpgid(child) == child:  # a worker leads its own group: nsys and all
                    os.killpg(child, signal.SIGKILL)
                else:
                    os.kill(child, signal.SIGKILL)


def install_stop_signals(guard: ExitGuard, request_stop: Callable[[int], None]) -> None:
    """SIGHUP, SIGTERM and SIGINT trip the guard and ask the app to stop. Plain signal handlers, not the
    loop's: they run even when the loop is blocked, and from before the loop starts."""
    def handle(signum: int, _frame: object) -> None:
        guard.trip(128 + signum)
        with contextlib.suppress(Exception):  # never raise into whatever the main thread was doing
            request_stop(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handle)


def save_measured(session: Session) -> list[Path]:
    """Every run of the session with steps and no file (neither opened from one nor saved), saved to the data
    directory's snapshots; one cut short is saved as cancelled, with its steps. Works on copies, so the watchdog
    may call it while the UI thread is stuck mid-update. The session says each file it wrote is the run's."""
    from perfconsole.tui.actions import SNAPSHOTS

    saved = []
    for record in list(session.runs):
        if not (record.steps or record.warmup_steps):
            continue
        path = data_dir() / SNAPSHOTS / f"{safe_name(record.name)}-{record.id}.json"
        if not session.saved(record.id, str(path)):  # first, so that a second caller at once passes it by
            continue
        snap = copy.deepcopy(record)
        if not snap.finished:
            snap.apply(ev.Error("cancelled", "the console was stopped: its terminal closed or a stop signal came"))
            snap.apply(ev.Finished("cancelled"))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            saved.append(store.save(snap, path))
        except (OSError, store.SnapshotError):
            session.forget_file(record.id)
            continue
    return saved


class TerminalOutput:
    """What the writer thread writes to: the terminal, whose errors (EIO once it is hung up) mean the
    terminal is gone, so output is dropped from then on and the thread lives to drain its queue."""

    def __init__(self, file: IO[str], on_lost: Callable[[], None]) -> None:
        self._file = file
        self._on_lost = on_lost
        self.gone = False

    def _lost(self) -> None:
        if not self.gone:
            self.gone = True
            self._on_lost()

    def write(self, text: str) -> None:
        if not self.gone:
            try:
                self._file.write(text)
            except (OSError, ValueError):
                self._lost()

    def flush(self) -> None:
        if not self.gone:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self._lost()

    def fileno(self) -> int:
        return self._file.fileno()


class ConsoleDriver(LinuxDriver):
    """textual's LinuxDriver, safe on a terminal that hangs up (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._suspended = False
        super().__init__(*args, **kwargs)
        self._file = TerminalOutput(self._file, self._terminal_gone)  # type: ignore[assignment]

    def _terminal_gone(self) -> None:
        guard = getattr(self._app, "exit_guard", None)
        if guard is not None:
            guard.lost()

    def _sigtstp_application(self, *args: Any) -> None:
        self._suspended = self._auto_restart
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        # A SIGCONT that ends no suspend of ours is the kernel's, sent with SIGHUP on a hang-up.
        if self._suspended and not self._file.gone:  # type: ignore[attr-defined]
            self._suspended = False
            super()._sigcont_application(*args)

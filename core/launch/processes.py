"""Child processes that never outlive their parent: each runs in its own process group, every live one
is known here, and all of them are killed at interpreter exit; `Stop` cancels them on Ctrl-C, SIGTERM
and SIGHUP so that a headless command keeps what they measured.

A process group does not hold everything a child starts: `nsys profile` starts an agent
(`nsys --start-agent --session-name profile-...`) in a session of its own, which a console killed mid-run
left behind. So every child carries a mark of its own in its environment (`CHILD_MARK`), which what it
starts inherits; killing a child, and reaping one, ends every process that still carries its mark.
`run_to_end` runs a short-lived tool (nsys stats) the same way, so a console that dies meanwhile leaves
none of it either.

`ChildProcess` owns the process: starting it, draining its stderr, cancelling (SIGTERM to the group,
SIGKILL after a grace period), killing and reaping. What the child says on stdout is its subclass's
business (core.launch.launcher.Launch reads the worker's event stream). Given an `executor`
(core.launch.slurm.SlurmExecutor), the child is a Slurm job instead, with the same stdout, stderr and
wait; a signal to its group becomes `scancel`.
"""
from __future__ import annotations

import atexit
import collections
import contextlib
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psutil

STDERR_TAIL = 40
KILL_GRACE_S = 3.0
STRAY_GRACE_S = 1.0   # a process left by a child that ended: SIGTERM, then SIGKILL after this
CHILD_MARK = "PERFCONSOLE_CHILD"

_live: set[ChildProcess] = set()
_live_lock = threading.Lock()


class ChildProcess:
    # A process that serves runs rather than being one (a warm process): ending the runs leaves it to its owner.
    outlives_runs = False

    def __init__(self, env: dict[str, str] | None = None, executor: Any = None) -> None:
        self.env = env
        self.executor = executor
        self.proc: Any = None   # a subprocess.Popen, or a core.launch.slurm.SlurmJob
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.cancelled = threading.Event()
        self.mark = uuid.uuid4().hex  # in the child's environment and in whatever it starts (see the module's doc)

    def environment(self) -> dict[str, str]:
        return {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1", CHILD_MARK: self.mark}

    def spawn(self, argv: list[str], torchrun: tuple[int, Any] | None = None) -> None:
        """Start `argv`; under an executor, `torchrun` (processes per node, log dir) makes it a job
        whose every node starts torchrun around it."""
        if self.executor is not None:
            self.proc = self.executor.spawn(argv, self.env, torchrun)
            with _live_lock:
                _live.add(self)
            threading.Thread(target=self._drain_stderr, daemon=True, name="job-stderr").start()
            return
        self.adopt(subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1, env=self.environment(),
            start_new_session=True,  # its own process group: cancel kills the worker and nsys alike
        ))

    def adopt(self, proc: Any) -> None:
        """Own a child started elsewhere with the same pipes and its own process group (core.launch.warm)."""
        self.proc = proc
        with _live_lock:
            _live.add(self)
        threading.Thread(target=self._drain_stderr, daemon=True, name="worker-stderr").start()

    def forget(self) -> None:
        """The child has been reaped: exit handlers need not kill it any more, and nothing it started stays."""
        with _live_lock:
            _live.discard(self)
        if self.executor is None:
            end_marked(self.mark, STRAY_GRACE_S)
        release = getattr(self.proc, "release", None)
        if release is not None:  # a warm worker: its warm process may reap it now
            release()

    def _drain_stderr(self) -> None:
        assert self.proc and self.proc.stderr
        for line in self.proc.stderr:
            self.stderr_tail.append(line.rstrip("\n"))

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def cancel(self) -> None:
        """Stop the run: SIGTERM to the whole group, SIGKILL after a grace period."""
        self.cancelled.set()
        self._signal_group(signal.SIGTERM)
        timer = threading.Timer(KILL_GRACE_S, self._signal_group, (signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def kill(self) -> None:
        """SIGKILL to the group and to every process that carries this child's mark (nsys's agent)."""
        self.cancelled.set()
        self._signal_group(signal.SIGKILL)
        if self.executor is None:
            end_marked(self.mark, 0.0)

    def discard(self) -> None:
        """Kill a child that will not be run (a held one, when its sweep is cancelled) and reap it."""
        self.kill()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        self.forget()

    def _signal_group(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.executor is not None:
            if self.proc.gone_since is None:  # one scancel: Slurm itself escalates to SIGKILL
                self.proc.cancel()
            return
        # Descendants that left the group (a setsid) are signalled too, while they can still be found as such.
        escaped = [] if sig != signal.SIGKILL else _descendants_elsewhere(self.proc.pid)
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for p in escaped:
            with contextlib.suppress(psutil.Error):
                p.send_signal(sig)


def _descendants_elsewhere(pid: int) -> list[psutil.Process]:
    """pid's descendants outside its process group."""
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if os.getpgid(p.pid) != pid]
    except (psutil.Error, OSError):
        return []


def marked(mark: str) -> list[psutil.Process]:
    """Live processes (not this one) whose environment carries CHILD_MARK=mark. Another user's processes
    cannot be read, and cannot be ours. Read from /proc where there is one (a few ms for a hundred
    processes, a third of psutil's time), else through psutil."""
    if not os.path.isdir("/proc/self"):
        return [p for p in psutil.process_iter() if _environ_of(p).get(CHILD_MARK) == mark]
    needle = f"\0{CHILD_MARK}={mark}\0".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                if needle not in b"\0" + f.read():
                    continue
            p = psutil.Process(int(entry.name))
            if p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (OSError, psutil.Error):
            continue
    return found


def _environ_of(p: psutil.Process) -> dict[str, str]:
    try:
        return {} if p.pid == os.getpid() or p.status() == psutil.STATUS_ZOMBIE else p.environ()
    except (psutil.Error, OSError):
        return {}


def end_marked(mark: str, grace_s: float) -> list[psutil.Process]:
    """End every process that carries the mark: SIGTERM and up to `grace_s` to go (none: SIGKILL at once).
    Returns those it found."""
    found = marked(mark)
    if not found:
        return found
    if grace_s > 0:
        for p in found:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        _gone, found_alive = psutil.wait_procs(found, timeout=grace_s)
    else:
        found_alive = found
    for p in found_alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return found


def run_to_end(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run a tool to its end and capture what it says, as subprocess.run does, but as a child of this module:
    in its own process group, marked, and killed with the others (at exit, on a signal, by kill_all).
    subprocess.TimeoutExpired after `timeout_s`, the tool and what it started killed."""
    child = ChildProcess()
    child.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, errors="replace", env=child.environment(), start_new_session=True)
    with _live_lock:
        _live.add(child)
    try:
        out, err = child.proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.proc.communicate()
        raise
    finally:
        child.forget()
    return subprocess.CompletedProcess(argv, child.proc.returncode, out, err)


def kill_all(runs_only: bool = False) -> None:
    """Kill every live child's process group (used at exit, on SIGHUP and SIGTERM); with `runs_only`, all but those
    that outlive runs (a console ending its runs stops its warm process after them, in order)."""
    with _live_lock:
        live = [child for child in _live if not (runs_only and child.outlives_runs)]
    for child in live:
        child.kill()


atexit.register(kill_all)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stop:
    """Ctrl-C, SIGTERM (kill, timeout, batch schedulers) and SIGHUP (a dropped SSH session) stop a
    headless command alike: the work under way is cancelled through the callback `cancelling` holds
    (its children's process groups are killed), the command keeps, saves and prints what was
    measured, and exits with `exit_code`, 128 + the signal's number (130, 143, 129).

    The handler never raises while there is work to cancel, so no save is cut short; a signal that
    arrives before the work starts cancels it as soon as it does. A second signal with nothing to
    cancel (the command is saving or printing) kills every child and exits at once.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._cancel: Callable[[], None] | None = None

    def handle(self, signum: int, _frame: object = None) -> None:
        if self._cancel is None and self.signum is not None:
            kill_all()
            raise SystemExit(128 + self.signum)
        if self.signum is None:
            self.signum = signum
        if self._cancel is not None:
            self._cancel()

    @contextlib.contextmanager
    def cancelling(self, cancel: Callable[[], None]) -> Iterator[None]:
        """While inside, a stop signal calls `cancel` (one that came before is passed on at once)."""
        self._cancel = cancel
        try:
            if self.signum is not None:
                cancel()
            yield
        finally:
            self._cancel = None

    def exit_code(self, code: int) -> int:
        """128 + the signal that stopped the command, else `code`."""
        return code if self.signum is None else 128 + self.signum


def install_exit_handlers() -> Stop:
    """Route SIGINT, SIGTERM and SIGHUP through a new `Stop` for the rest of the process."""
    stop = Stop()
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop.handle)
    return stop

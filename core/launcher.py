"""Start the worker for a RunSpec in its own process group, stream its events, cancel it, clean up.

`Launch.events()` yields decoded events and always ends with exactly one `Finished`. Whatever the
child does (exit cleanly, OOM, crash, get killed, print junk), the caller sees a well-formed stream:
a crash or kill becomes an `error` event with the exit code or signal and the tail of stderr. Every
live launch is killed (whole process group) at interpreter exit, so nothing outlives the console.
A launch can be started ahead of its turn with `start(hold=True)`: the child imports, says it is
ready (`wait_ready()`), and touches no GPU until `events()` lets it go (core.cell_runner uses this).
"""
from __future__ import annotations

import atexit
import collections
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from perfconsole.core import events as ev
from perfconsole.core.spec import RunSpec

STDERR_TAIL = 40
KILL_GRACE_S = 3.0

_live: set[Launch] = set()
_live_lock = threading.Lock()


def worker_argv(spec: RunSpec, out_dir: Path | None) -> list[str]:
    argv = [sys.executable, "-m", "perfconsole.core.worker", "--spec", json.dumps(spec.to_dict())]
    if out_dir is not None:
        argv += ["--out-dir", str(out_dir)]
    return argv


class Launch:
    def __init__(self, spec: RunSpec, out_dir: Path | None = None, nsys: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.spec = spec
        self.out_dir = out_dir
        self.nsys_explicit = nsys
        self.env = env
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.other_stdout: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.cancelled = threading.Event()
        self._pending: list[ev.Event] = []
        self._nsys = None
        self._rep_base: Path | None = None
        self._refused = False
        self._held = False
        self._early: list[str] = []  # stdout lines read by wait_ready(), replayed by events()

    # --- lifecycle -----------------------------------------------------------------------------
    def command(self) -> list[str] | None:
        """The argv to run, or None when the launch is refused (the reason is already pending).

        Subclasses run another worker through the same stream, cancel and clean-up by overriding this.
        """
        spec = self.spec
        if spec.profile == "nsys":
            from perfconsole.core.profiling.errors import NsysError
            from perfconsole.core.profiling.locate import find_nsys
            from perfconsole.core.profiling.nsys_run import profile_command

            try:
                self._nsys = find_nsys(self.nsys_explicit)
            except NsysError as exc:  # an nsys the user named that does not work: say so, run nothing
                self._pending += [ev.Error("profiler", str(exc)), ev.Finished("error")]
                return None
            if self._nsys is None:
                self._pending.append(ev.Error("profiler", "nsys not found; using the PyTorch profiler instead"))
                spec = self.spec = spec.with_(profile="torch")
            else:
                out = self._need_out_dir()
                self._rep_base = out / "profile"
                self._pending.append(ev.Progress("profiling", f"under nsys {self._nsys.version}"))
                return profile_command(self._nsys, worker_argv(spec, out), self._rep_base)
        if spec.profile == "torch" or spec.memory:
            self._need_out_dir()
        return worker_argv(spec, self.out_dir)

    def start(self, hold: bool = False) -> None:
        """Start the child. With `hold` it imports what it needs and then waits (see `worker.hold`):
        `wait_ready()` returns once it has, and `events()` lets it go."""
        argv = self.command()
        if argv is None:
            self._refused = True
            return
        if hold:
            if self._nsys is not None:
                raise ValueError("a launch under nsys cannot be held: nsys would record the wait")
            argv = [*argv, "--hold"]
        self._held = hold
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8", errors="replace", bufsize=1, env=env,
            start_new_session=True,  # its own process group: cancel kills the worker and nsys alike
        )
        with _live_lock:
            _live.add(self)
        threading.Thread(target=self._drain_stderr, daemon=True, name="worker-stderr").start()

    def _need_out_dir(self) -> Path:
        if self.out_dir is None:
            from perfconsole.core.paths import runs_dir
            from perfconsole.core.record import new_id

            self.out_dir = runs_dir() / new_id()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return self.out_dir

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
        self.cancelled.set()
        self._signal_group(signal.SIGKILL)

    def wait_ready(self) -> None:
        """Block until a held child is ready for its turn, or has ended (`events()` then says how)."""
        if not self._held or self.proc is None or self.proc.stdout is None:
            return
        for line in self.proc.stdout:
            self._early.append(line)
            if _is_held(line):
                return

    def discard(self) -> None:
        """Kill a child that will not be run (a held one, when its sweep is cancelled) and reap it."""
        self.kill()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        with _live_lock:
            _live.discard(self)

    def _signal_group(self, sig: int) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # --- the stream ----------------------------------------------------------------------------
    def events(self) -> Iterator[ev.Event]:
        if self.proc is None and not self._refused:
            self.start()
        yield from self._pending
        if self._refused:
            return
        assert self.proc and self.proc.stdout
        if self._held:
            self._go()
        finished: ev.Finished | None = None
        try:
            for line in itertools.chain(self._early, self.proc.stdout):
                line = line.strip()
                if not line:
                    continue
                if not line.startswith("{"):
                    self.other_stdout.append(line)  # nsys's own messages share the pipe
                    continue
                try:
                    event = ev.decode(line)
                except ev.EventError:
                    self.other_stdout.append(line)
                    continue
                if isinstance(event, ev.Progress) and event.stage == ev.HELD:
                    continue
                if isinstance(event, ev.Finished):
                    finished = event  # held back: post-processing may still add events
                else:
                    yield event
            code = self.proc.wait()
        finally:
            with _live_lock:
                _live.discard(self)
        if finished is None:
            yield from self._unexpected_end(code)
            return
        if self._nsys is not None and finished.status == "ok":
            yield from self._nsys_tables()
        yield finished

    def _go(self) -> None:
        assert self.proc and self.proc.stdin
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # it has died already; the stream will say how
            pass

    def _unexpected_end(self, code: int) -> Iterator[ev.Event]:
        tail = "\n".join(self.stderr_tail)
        if self.cancelled.is_set():
            yield ev.Error("cancelled", "cancelled by the user", tail)
            yield ev.Finished("cancelled")
            return
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            msg = f"worker killed by signal {name}"
        else:
            msg = f"worker exited with code {code} before finishing"
        last = next((ln for ln in reversed(self.stderr_tail) if ln.strip()), "")
        yield ev.Error("crash", f"{msg}{': ' + last if last else ''}", tail)
        yield ev.Finished("error")

    def _nsys_tables(self) -> Iterator[ev.Event]:
        from perfconsole.core.profiling.nsys_run import NsysError, export_stats

        assert self._rep_base is not None and self.out_dir is not None
        rep = self._rep_base.with_suffix(".nsys-rep")
        yield ev.Progress("profiling", "nsys stats: exporting tables")
        try:
            tables, files, warnings = export_stats(self._nsys, rep, self.out_dir)
        except NsysError as exc:
            yield ev.Error("profiler", f"nsys stats failed: {exc}", "\n".join(self.other_stdout))
            return
        for w in warnings:
            yield ev.Progress("profiling", w)
        yield ev.ProfileReady("nsys", [str(rep), *files], tables)


def _is_held(line: str) -> bool:
    if not line.lstrip().startswith("{"):
        return False
    try:
        event = ev.decode(line.strip())
    except ev.EventError:
        return False
    return isinstance(event, ev.Progress) and event.stage == ev.HELD


def kill_all() -> None:
    """Kill every live launch's process group (used at exit, on SIGHUP and SIGTERM)."""
    with _live_lock:
        live = list(_live)
    for launch in live:
        launch.kill()


atexit.register(kill_all)


def install_exit_handlers() -> None:
    """SIGTERM and SIGHUP (a dropped SSH session) kill every live run, then exit the process."""

    def handler(signum: int, _frame) -> None:
        kill_all()
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)

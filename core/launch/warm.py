"""Runs that start warm: a worker forked from a process that has imported torch already
(core.launch.warm_server) instead of a fresh `python -m` that imports it first (about 2 CPU-s).

The console keeps one warm process for its life (`WarmProcess`, started by `start_own`; `perfconsole serve`
runs one console per browser tab, so each tab has its own). It names its socket in a pointer file under
`<data dir>/warm/` (0700), so a command run meanwhile (`perfconsole run` ...) finds it (`find`) and starts
its runs warm too; with no console up, runs start cold. A launch asks `spawn`, which returns a `WarmProc`
(what `subprocess.Popen` offers the launcher: pid, pipes, poll, wait) or the reason it must start cold.

Only what is ours is used: the pointer directory, the pointer file, the socket's 0700 directory and the
socket are owned by this user, the server's peer credentials say the same, and it runs this interpreter
and this copy of perfconsole (`hello`).
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from perfconsole.core.launch.processes import ChildProcess
from perfconsole.core.launch.warm_child import ROOM, START_VAR
from perfconsole.core.launch.warm_server import MAX_FDS, WORKERS

__all__ = ["SERVER", "SHARED_VAR", "START_VAR", "WORKERS", "WarmProc", "WarmProcess", "find", "shared_value", "spawn",
           "start_own", "stop_own"]

READY_TIMEOUT_S = 120.0   # a launch waits this long for its own console's warm process to finish importing
OFF_VAR = "PERFCONSOLE_WARM"   # "off": every run starts cold
# Set by `perfconsole serve` for the consoles of its tabs, as "PID:SOCKET": the warm process the server keeps for all of
# them (each tab's console then keeps none of its own)
SHARED_VAR = "PERFCONSOLE_WARM_SHARED"
SERVER = "perfconsole.core.launch.warm_server"   # the warm process's module, in its command line


def pointer_dir() -> Path:
    from perfconsole.core.paths import data_dir

    return data_dir() / "warm"


def _private_dir(path: Path) -> str | None:
    """Why `path` is not a directory that only this user can use, or None."""
    try:
        st = path.lstat()
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return f"{path} is not a directory of this user's alone (0700)"
    return None


class WarmProcess(ChildProcess):
    """The warm process a console owns: started at once, ready once it has imported, ended with the console
    (by `stop`, at exit with every other child, or by itself when the console is gone)."""

    outlives_runs = True

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="perfconsole-warm-"))  # 0700, and short: a socket path has 108 bytes
        self.socket = self.dir / "socket"
        self.pointer = pointer_dir() / str(os.getpid())
        self.ready = threading.Event()
        self.failed: str | None = None

    def start(self) -> None:
        pointer_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
        pointer: Path | None = self.pointer if _private_dir(pointer_dir()) is None else None
        argv = [sys.executable, "-m", SERVER, "--socket", str(self.socket),
                "--parent", str(os.getpid()), "--room", " " * ROOM]
        self.spawn(argv + (["--pointer", str(pointer)] if pointer else []))
        threading.Thread(target=self._await_ready, daemon=True, name="warm-ready").start()

    def _await_ready(self) -> None:
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            code = self.proc.wait()
            last = next((ln for ln in reversed(self.stderr_tail) if ln.strip()), "")
            self.failed = f"the warm process ended before it was ready (code {code}){': ' + last if last else ''}"
        self.ready.set()

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> str | None:
        """None once it serves; else why it does not."""
        if not self.ready.wait(timeout):
            return "the warm process is still importing"
        if self.failed is None and self.proc.poll() is not None:
            self.failed = f"the warm process has ended (code {self.proc.returncode})"
        if self.failed is None and self.cancelled.is_set():  # SIGKILLed (kill_all) and maybe not yet reaped
            self.failed = "the warm process has been killed"
        return self.failed

    def stop(self) -> None:
        """End it: closing its stdin is its cue (it kills its runs' groups, removes its socket), SIGKILL after a while."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
            self.proc.wait()
        self.forget()
        self.pointer.unlink(missing_ok=True)
        self.socket.unlink(missing_ok=True)
        try:
            self.dir.rmdir()
        except OSError:
            pass


_own: WarmProcess | None = None
_own_lock = threading.Lock()


def turned_off() -> str | None:
    """`PERFCONSOLE_WARM=off` (or 0, no): every run starts cold, and a console starts no warm process."""
    value = os.environ.get(OFF_VAR, "")
    return f"{OFF_VAR}={value}" if value.lower() in ("off", "0", "no") else None


def start_own() -> WarmProcess | None:
    """Start this process's warm process (once; call it from the main thread: the kernel's parent-death signal
    follows the thread that started a process)."""
    global _own
    if turned_off():
        return None
    with _own_lock:
        if _own is None or _own.proc is None or _own.proc.poll() is not None or _own.cancelled.is_set():
            # One that kill_all SIGKILLed may not have died yet: poll() cannot tell, its kill mark can.
            if _own is not None:
                _own.stop()
            _own = WarmProcess()
            _own.start()
        return _own


def stop_own() -> None:
    global _own
    with _own_lock:
        own, _own = _own, None
    if own is not None:
        own.stop()


def shared_value(own: WarmProcess) -> str:
    """SHARED_VAR's value for the children of the process that owns `own`."""
    return f"{own.proc.pid}:{own.socket}"


def _shared(value: str) -> tuple[list[Path], str]:
    """The socket SHARED_VAR names, once its warm process has imported (its socket is bound then)."""
    pid, _, path = value.partition(":")
    sock = Path(path)
    if not pid.isdigit() or _private_dir(sock.parent) is not None:
        return [], f"{SHARED_VAR} names no warm process of this user's"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not sock.exists():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return [], "the server's warm process has ended"
        if time.monotonic() > deadline:
            return [], "the server's warm process is still importing"
        time.sleep(0.1)
    return [sock], ""


def find() -> tuple[list[Path], str]:
    """The sockets of warm processes to try: this process's own, else the one its server shares (SHARED_VAR),
    else those of consoles and servers named by the pointer files; else none and why."""
    own = _own
    if own is not None:
        why = own.wait_ready()
        return ([own.socket], "") if why is None else ([], why)
    if os.environ.get(SHARED_VAR):
        return _shared(os.environ[SHARED_VAR])
    folder = pointer_dir()
    if not folder.exists():
        return [], "no console or server is up"
    why = _private_dir(folder)
    if why is not None:
        return [], why
    found = []
    for pointer in sorted(folder.iterdir()):
        try:
            st = pointer.lstat()
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or not pointer.name.isdigit():
                continue
            sock = Path(pointer.read_text().strip())
        except OSError:
            continue
        if _private_dir(sock.parent) is not None:
            continue
        try:
            os.kill(int(pointer.name), 0)
        except ProcessLookupError:  # its console died without a word (SIGKILL): the pointer is stale
            for stale in (pointer, sock):
                stale.unlink(missing_ok=True)
            try:
                sock.parent.rmdir()
            except OSError:
                pass
            continue
        except PermissionError:
            continue
        found.append(sock)
    return found, "" if found else "no console or server is up"


def _connect(path: Path) -> tuple[socket.socket, dict[str, Any]]:
    st = path.lstat()
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{path} is not this user's socket")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(10)
        sock.connect(str(path))
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        if int.from_bytes(creds[4:8], sys.byteorder) != os.getuid():
            raise OSError(f"{path} is served by another user")
        hello = json.loads(sock.recv(1 << 16) or b"null")
        if not isinstance(hello, dict):
            raise OSError(f"{path}: no greeting")
        sock.settimeout(None)
    except (OSError, ValueError):
        sock.close()
        raise
    return sock, hello


def _mismatch(hello: dict[str, Any]) -> str | None:
    from perfconsole.core.launch.warm_server import _package, interpreter

    if hello.get("why_not"):
        return str(hello["why_not"])
    if hello.get("interpreter") != interpreter():
        return f"the warm process runs another interpreter ({hello.get('executable')})"
    if hello.get("package") != _package():
        return f"the warm process runs another copy of perfconsole ({hello.get('package')})"
    return None


def spawn(argv: list[str], env: dict[str, str], cwd: str | None = None,
          fds: list[int] | None = None) -> tuple[WarmProc | None, str]:
    """Start `argv` (`python -m <worker> ...`) forked from a warm process: the process, or None and why not.
    Its stdin, stdout and stderr are pipes to the caller, or the descriptors `fds` (a torchrun rank's: warm_rank)."""
    if turned_off():
        return None, turned_off() or ""
    if not hasattr(os, "fork") or not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
        return None, "this platform has no fork with pidfds"
    paths, why = find()
    for path in paths:
        try:
            sock, hello = _connect(path)
        except (OSError, ValueError) as exc:
            why = f"the warm process cannot be reached ({exc})"
            continue
        why = _mismatch(hello) or ""
        if why:
            sock.close()
            continue
        return _request(sock, argv, env, cwd or os.getcwd(), fds)
    return None, why


def _request(sock: socket.socket, argv: list[str], env: dict[str, str], cwd: str,
             fds: list[int] | None) -> tuple[WarmProc | None, str]:
    if fds is None:
        pipes = [os.pipe() for _ in range(MAX_FDS)]  # stdin, stdout, stderr: (read, write) each
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours: list[int] | None = [pipes[0][1], pipes[1][0], pipes[2][0]]
    else:
        theirs, ours = list(fds), None
    try:
        socket.send_fds(sock, [json.dumps({"argv": argv, "env": env, "cwd": cwd}).encode()], theirs)
        reply = json.loads(sock.recv(1 << 16) or b"null")
    except (OSError, ValueError) as exc:
        reply = {"cold": f"the warm process did not answer ({exc})"}
    finally:
        for fd in theirs if ours is not None else ():
            os.close(fd)
    if not isinstance(reply, dict) or "pid" not in reply:
        for fd in ours or ():
            os.close(fd)
        sock.close()
        return None, str(reply.get("cold") if isinstance(reply, dict) else "the warm process did not answer")
    return WarmProc(int(reply["pid"]), sock, ours), ""


WAIT_SLICE = 0.2  # s: the longest a waiting thread sleeps before it looks at the status again


class WarmProc:
    """A worker forked by a warm process, as the launcher sees a `subprocess.Popen`: its pid (also its process
    group's), text pipes to its stdin, stdout and stderr, and its exit status (negative: the signal), which the
    warm process sends, keeping the child a zombie, so that its pid and group stay its own, until `release`.
    A child given the caller's own descriptors (`pipes` None) has no pipes here."""

    def __init__(self, pid: int, sock: socket.socket, pipes: list[int] | None) -> None:
        self.pid = pid
        self.args = None
        self.returncode: int | None = None
        self._sock = sock
        self._lock = threading.Lock()
        self._released = False
        self.stdin = self.stdout = self.stderr = None
        if pipes is not None:
            stdin, stdout, stderr = pipes
            self.stdin = open(stdin, "w", encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115
            self.stdout = open(stdout, encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115
            self.stderr = open(stderr, encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115

    def _check(self, timeout: float | None) -> int | None:
        """The exit status once the warm process has sent it, waiting up to `timeout` seconds (None: until it
        comes). Another thread may read the status between this one's look and its wait (a poll beside a wait),
        so the wait is taken in short slices, each ended by a fresh look, never once for the whole time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if self.returncode is not None or self._released:
                    return self.returncode
                try:
                    data = self._sock.recv(1 << 12, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    data = None
                except OSError:
                    data = b""
                if data is not None:
                    # No word and the connection gone: the warm process died, and its death signal killed the child.
                    self.returncode = int(json.loads(data)["exit"]) if data else -signal.SIGKILL
                    return self.returncode
            left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, deadline - time.monotonic())
            if left <= 0:
                return None
            try:
                select.select([self._sock], [], [], left)
            except (OSError, ValueError):  # released (the socket closed) meanwhile: the next look says so
                pass

    def poll(self) -> int | None:
        return self._check(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._check(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(["warm worker", str(self.pid)], timeout or 0)
        return code

    def release(self) -> None:
        """Let the warm process reap the child (or kill its group, if it still runs: nobody will read it)."""
        with self._lock:
            if self._released:
                return
            self._released = True
            if self.returncode is None:
                self.returncode = -signal.SIGKILL
        self._sock.close()  # the pipes close as a Popen's do, with this object: a thread may still drain them

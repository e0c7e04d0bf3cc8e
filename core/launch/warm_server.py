"""The warm process: `python -m perfconsole.core.launch.warm_server --socket PATH --pointer FILE`.

It imports torch and the workers (nothing on a GPU, no thread of its own), then serves on a Unix socket
(SOCK_SEQPACKET, in a 0700 directory, peers of its own uid only). Each connection asks for one run: the
worker's argv (`python -m <module> ...`, a module named in WORKERS: torchrun's too, whose ranks are forked in
turn through core.launch.warm_rank), its environment and working directory, with the run's stdin, stdout and
stderr passed as file descriptors. The warm process forks; the child starts a session of its own (its own
process group, as a cold worker's `start_new_session`), takes those three descriptors, the environment and the
directory, and runs the module as `python -m` would (core.launch.warm_child). The reply is the child's pid,
and later its exit status (negative: the signal that ended it). The child stays a zombie, so its pid and its
group cannot be reused, until the connection closes; a connection that closes while its child
runs (the launcher dropped it, or died) has that child's group killed.

It does not outlive the process that started it (its console): its stdin is a pipe from that process, and EOF
there, SIGTERM, SIGHUP or the parent's death (PR_SET_PDEATHSIG) take its socket away and kill the groups of the
console's own runs. A run a command asked for (`perfconsole run` beside the console, its own process reading it)
goes on to its end, so quitting a console loses no measurement of another terminal's; the warm process ends
after the last such run. Each child gets PR_SET_PDEATHSIG too, so a warm process that is SIGKILLed takes its
runs with it.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import traceback
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from perfconsole.core.launch.warm_child import IOENCODING, THREADS, become, io_encoding, pdeathsig
from perfconsole.core.measure import gc_control

WORKERS = ("perfconsole.core.measure.worker", "perfconsole.core.grids.attention_worker", "torch.distributed.run")
# What a run imports before its first step (python -X importtime on a tiny CPU run): torch's compiler stack
# comes in lazily with the optimizer and the FLOP counter, about 1.8 s of it. None of it starts a thread
# or touches a GPU (`untrusted` checks).
PRELOAD = ("torch", "torch._dynamo", "torch.fx.experimental.symbolic_shapes", "torch.utils.flop_counter",
           "torch.optim", "perfconsole.model.transformer", "perfconsole.core.measure.bench",
           "perfconsole.core.measure.device_peaks", "perfconsole.core.store", *WORKERS)
# Read as torch, numpy and their libraries load, or as Python starts: a run whose environment sets one of
# these differently from the warm process's would not be the same program forked; it starts cold.
IMPORT_TIME = ("PYTHON", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "LD_", "MALLOC_", "TORCH_")
UNBUFFERED = "PYTHONUNBUFFERED"   # a forked worker's streams are set up in core.launch.warm_child (IOENCODING too)
AT_USE = ("TORCH_NCCL_",)  # read as NCCL's group is made, not as torch loads (torchrun sets one for every rank)
MAX_MESSAGE = 1 << 20
STOP_SIGNALS = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT}
MAX_FDS = 3


def differs(env: dict[str, str], base: dict[str, str]) -> str | None:
    """The first variable read at import time that `env` sets otherwise than `base`, or None."""
    for key in sorted(set(env) | set(base)):
        if key == UNBUFFERED or key.startswith(AT_USE) or (key == THREADS and env.get(key, "").isdigit() and int(
                env[key]) > 0) or (key == IOENCODING and io_encoding(env.get(key)) is not None):
            continue
        if key.startswith(IMPORT_TIME) and env.get(key) != base.get(key):
            return key
    return None


def untrusted() -> str | None:
    """Why forking this process cannot be trusted now, or None."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the warm process"
    if threading.active_count() > 1:
        return f"the warm process runs {threading.active_count()} Python threads"
    return None


@dataclass
class Run:
    conn: socket.socket
    pid: int = 0
    pidfd: int = -1
    status: int | None = None       # set once the child has ended (it stays a zombie until released)
    connected: bool = True
    client: int = 0                 # the pid that asked for it (SO_PEERCRED): the console, or a command


@dataclass
class Server:
    listener: socket.socket
    watch_fd: int
    sel: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    runs: dict[int, Run] = field(default_factory=dict)   # by the connection's fd
    stopping: bool = False
    server_pid: int = 0
    start_cwd: str = field(default_factory=os.getcwd)
    base_env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    wakeup: tuple[socket.socket, socket.socket] | None = None  # a stop signal's byte lands here (set_wakeup_fd)
    owner: int = 0                  # the console that started it: its runs end with it
    draining: bool = False          # the owner is gone: no new runs; a command's run in flight goes on to its end
    on_drain: Any = None            # called as draining starts: takes the socket and its pointer away

    def serve(self) -> None:
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.watch_fd, selectors.EVENT_READ, "watch")
        if self.wakeup is not None:
            self.sel.register(self.wakeup[0], selectors.EVENT_READ, "signal")
        while True:
            if self.stopping and not self.draining:
                self.drain()
            if self.draining and not self.commands_running():
                break
            for key, _ in self.sel.select(timeout=1.0 if self.draining else None):
                what = key.data
                if what == "watch":
                    if not os.read(self.watch_fd, 4096):  # the process that started us is gone
                        self.sel.unregister(self.watch_fd)
                        self.stopping = True
                elif what == "signal":
                    self.wakeup[0].recv(64)  # the handler has set `stopping`
                else:
                    self.handle(what)
        self.stop()

    def drain(self) -> None:
        """The owner is gone (or a stop signal came): take no new run, end the owner's runs and those whose
        client is gone; a run a command asked for (`perfconsole run` beside the console) goes on to its end,
        its command still reading it, and the process ends after the last of them."""
        self.draining = True
        self.sel.unregister(self.listener)
        self.listener.close()
        if self.on_drain is not None:
            self.on_drain()
        for run in list(self.runs.values()):
            if not run.pid:
                self.forget(run)
            elif run.status is None and (run.client == self.owner or not run.connected):
                _killpg(run.pid)

    def commands_running(self) -> bool:
        return any(run.client != self.owner and (run.connected or run.status is None) for run in self.runs.values()
                   if run.pid)

    def handle(self, what: object) -> None:
        """A child's end or a client's word; a failure here is one run's (it is told so), never the server's."""
        key = what[1] if isinstance(what, tuple) else what
        try:
            if what == "accept":
                self.accept()
            elif isinstance(what, tuple):
                self.child_ended(key)
            else:
                self.from_client(key)
        except Exception:  # noqa: BLE001 - the other runs go on
            traceback.print_exc()
            run = self.runs.get(key) if isinstance(key, int) else None
            if run is not None and not run.pid:
                self.reply(run, {"cold": "the warm process failed to start it"})
                self.forget(run)

    def accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        if int.from_bytes(creds[4:8], sys.byteorder) != os.getuid():  # pid, uid, gid
            conn.close()
            return
        hello = {"pid": os.getpid(), "executable": sys.executable, "interpreter": interpreter(), "package": _package(),
                 "why_not": untrusted()}
        try:
            conn.sendall(json.dumps(hello).encode())
        except OSError:
            conn.close()
            return
        self.runs[conn.fileno()] = Run(conn, client=int.from_bytes(creds[0:4], sys.byteorder))
        self.sel.register(conn, selectors.EVENT_READ, conn.fileno())

    def from_client(self, key: int) -> None:
        run = self.runs.get(key)
        if run is None:
            return
        if run.pid:  # a started run's connection only ever closes
            try:
                data = run.conn.recv(16)
            except OSError:
                data = b""
            if not data:
                self.release(run)
            return
        try:
            msg, fds, _flags, _addr = socket.recv_fds(run.conn, MAX_MESSAGE, MAX_FDS)
        except OSError:
            msg, fds = b"", []
        if not msg or len(fds) != MAX_FDS:
            for fd in fds:
                os.close(fd)
            self.forget(run)
            return
        try:
            self.start(run, json.loads(msg), fds)
        finally:
            for fd in fds:
                os.close(fd)

    def start(self, run: Run, request: dict, fds: list[int]) -> None:
        argv = request["argv"]
        why = untrusted()
        if why is None and (len(argv) < 3 or argv[1] != "-m" or argv[2] not in WORKERS):
            why = "not a worker this warm process has loaded"
        key = differs(request["env"], self.base_env) if why is None else None
        if key is not None:
            why = f"the run sets {key} otherwise than the warm process, which read it as torch was imported"
        if why is not None:
            self.reply(run, {"cold": why})
            self.forget(run)
            return
        sys.stdout.flush()
        sys.stderr.flush()
        # A stop signal to the child before it has put back the default handlers would run ours there: held
        # back over the fork, and let through in the child once they are back (a cancel at once is not lost).
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        # The pid goes out only once the child leads its own group: a cancel sent to the group at once (the
        # launch cancelled before it started) would otherwise find no group and be lost.
        in_group, grouped = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(in_group)
            self.become_worker(fds, request, grouped)  # never returns
        os.close(grouped)
        os.read(in_group, 1)  # EOF: the child has closed its end after setsid(), or has died
        os.close(in_group)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        run.pid = pid
        run.pidfd = os.pidfd_open(pid)
        self.sel.register(run.pidfd, selectors.EVENT_READ, ("child", run.conn.fileno()))
        self.reply(run, {"pid": pid})

    def become_worker(self, fds: list[int], request: dict, grouped: int) -> None:
        code = 1
        try:
            os.setsid()
            os.close(grouped)  # the warm process may now name this group to its launch
            pdeathsig(signal.SIGKILL)
            if os.getppid() != self.server_pid:  # the warm process died as we forked
                os._exit(137)
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            self.sel.close()
            if self.wakeup is not None:
                for end in self.wakeup:
                    end.close()
            for run in self.runs.values():
                run.conn.close()
                if run.pidfd >= 0:
                    os.close(run.pidfd)
            self.listener.close()
            os.close(self.watch_fd)
            code = become(fds, request, self.start_cwd)
        except BaseException:  # noqa: BLE001 - nothing may return into the server's loop
            traceback.print_exc()
        finally:
            os._exit(code)

    def reply(self, run: Run, obj: dict) -> None:
        try:
            run.conn.send(json.dumps(obj).encode())
        except OSError:
            run.connected = False

    def child_ended(self, key: int) -> None:
        run = self.runs.get(key)
        if run is None or run.pidfd < 0:
            return
        info = os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        if info is None:
            return
        run.status = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        self.sel.unregister(run.pidfd)
        os.close(run.pidfd)
        run.pidfd = -1
        if run.connected:
            self.reply(run, {"exit": run.status})
        else:
            self.reap(run)

    def release(self, run: Run) -> None:
        """The client has closed: reap an ended child, kill a running one's group (reaped when it ends)."""
        run.connected = False
        self.sel.unregister(run.conn)
        if run.status is not None:
            self.reap(run)
        else:
            _killpg(run.pid)

    def reap(self, run: Run) -> None:
        try:
            os.waitpid(run.pid, 0)
        except ChildProcessError:
            pass
        self.forget(run)

    def forget(self, run: Run) -> None:
        key = run.conn.fileno()
        if run.connected:
            self.sel.unregister(run.conn)
        run.conn.close()
        self.runs.pop(key, None)

    def stop(self) -> None:
        for run in list(self.runs.values()):
            if run.pid and run.status is None:
                _killpg(run.pid)
        for run in list(self.runs.values()):
            if run.pid:
                try:
                    os.waitpid(run.pid, 0)
                except ChildProcessError:
                    pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def interpreter() -> list[str]:
    """This interpreter as a run would be: its binary, links followed (a venv's `python` and `python3` are one), and
    its environment (`sys.prefix`: one venv's packages, not another's beside the same binary)."""
    return [os.path.realpath(sys.executable), sys.prefix]


def _package() -> str:
    """The perfconsole this process runs (the folder holding core/)."""
    return str(Path(__file__).resolve().parents[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="perfconsole-warm")
    parser.add_argument("--socket", required=True, help="where to listen (its directory must be ours, 0700)")
    parser.add_argument("--pointer", default=None, help="a file that names the socket, for commands to find it")
    parser.add_argument("--parent", type=int, required=True, help="the pid of the process that started it")
    parser.add_argument("--room", default="", help="spaces: room for a forked worker's command line")
    args = parser.parse_args(argv)
    pdeathsig(signal.SIGTERM)
    if os.getppid() != args.parent:  # it died before the line above
        return 0
    server = Server(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET), 0, owner=args.parent)
    server.wakeup = socket.socketpair()
    for end in server.wakeup:
        end.setblocking(False)
    signal.set_wakeup_fd(server.wakeup[1].fileno(), warn_on_full_buffer=False)
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: setattr(server, "stopping", True))
    gc_control.space()  # then frozen before any fork: a worker's passes skip torch's objects, its pages stay shared
    for module in PRELOAD:
        importlib.import_module(module)
    gc_control.settle()
    server.server_pid = os.getpid()
    server.watch_fd = 0
    path = Path(args.socket)
    server.listener.bind(str(path))
    server.listener.listen(16)
    if args.pointer:
        _write_pointer(Path(args.pointer), path)

    def unlink() -> None:
        for f in (path, Path(args.pointer) if args.pointer else None):
            if f is not None:
                f.unlink(missing_ok=True)

    server.on_drain = unlink
    print("ready", flush=True)
    try:
        server.serve()
    finally:
        unlink()
        try:
            path.parent.rmdir()  # the private directory its console made for the socket, when nothing else is in it
        except OSError:
            pass
    return 0


def _write_pointer(pointer: Path, sock: Path) -> None:
    tmp = pointer.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(str(sock))
    os.replace(tmp, pointer)


if __name__ == "__main__":
    sys.exit(main())

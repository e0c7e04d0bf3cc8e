"""The forked side of a warm start (core.launch.warm_server): a child of the warm process becomes the run's
worker, as `python -m <worker>` would have started it: the run's stdin, stdout and stderr on 0, 1 and 2, its
working directory and environment, its command line as `ps` shows it, and the module run as __main__.
"""
from __future__ import annotations

import atexit
import codecs
import ctypes
import os
import sys
import traceback

START_VAR = "PERFCONSOLE_START"   # "warm", or "cold: <why>": the run's record says how it began
# torchrun gives each rank OMP_NUM_THREADS=1 where it is unset: a positive count may differ from the warm process's
# (warm_server.differs), and `become` sets it as the variable does as torch loads
THREADS = "OMP_NUM_THREADS"
# Read as Python sets up its standard streams; `become` sets up a forked worker's as that start-up would have.
IOENCODING = "PYTHONIOENCODING"


def io_encoding(value: str | None) -> tuple[str, str | None] | None:
    """PYTHONIOENCODING's `encoding[:errors]` as Python reads it for stdin and stdout: UTF-8 where it names no
    encoding (this locale's, and a cold worker's); None where Python would refuse to start with it (an unknown
    encoding or error handler), so that such a run starts cold and says so as Python does."""
    encoding, _, errors = (value or "").partition(":")
    try:
        codecs.lookup(encoding or "utf-8")
        if errors:
            codecs.lookup_error(errors)
    except LookupError:
        return None
    return encoding or "utf-8", errors or None


def pdeathsig(sig: int) -> None:
    """Have the kernel send `sig` when the parent ends (Linux; a no-op elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
        except OSError:
            pass


ROOM = 4096   # bytes of the warm process's command line (spaces) that a forked worker writes its own into


def retitle(argv: list[str]) -> None:
    """Show `argv` as this process's command line (ps, top, psutil, nvidia-smi), as a cold worker's shows:
    written over the command line's own memory, which the warm process made ROOM bytes longer (Linux)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end: fields 48 and 49
    except (OSError, IndexError, ValueError):
        return
    size = end - start
    text = ("\0".join(argv).encode(errors="replace") + b"\0")[:size - 1]
    # The rest stays spaces, one last word of them, as the warm process's own --room shows (NULs would read
    # as thousands of empty arguments).
    ctypes.memmove(start, text.ljust(size - 1, b" ") + b"\0", size)


def become(fds: list[int], request: dict, start_cwd: str) -> int:
    """Take the run's descriptors, directory, environment and command line, run its module; its exit code."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    if sys.path and sys.path[0] == start_cwd:  # `python -m` puts its directory first
        sys.path[0] = request["cwd"]
    threads = os.environ.get(THREADS)  # the warm process's, read as torch loaded
    os.environ.clear()
    os.environ.update(request["env"])
    os.environ[START_VAR] = "warm"
    if os.environ.get(THREADS, threads) != threads:  # a positive count (warm_server.differs)
        # What OMP_NUM_THREADS does as torch loads: the intra-op threads, OpenMP's and MKL's (no thread pool has
        # started in the warm process, which runs nothing in parallel).
        sys.modules["torch"].set_num_threads(int(os.environ[THREADS]))
    retitle(request["argv"])
    encoding, errors = io_encoding(os.environ.get(IOENCODING)) or ("utf-8", None)  # stderr's errors are Python's
    sys.stdin = open(0, "r", encoding=encoding, errors=errors, closefd=False)  # noqa: SIM115 - the process's own
    sys.stdout = open(1, "w", encoding=encoding, errors=errors, buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    return run_module(request["argv"])


def run_module(argv: list[str]) -> int:
    """Run `python -m <module> <args>` in this process; its exit code, as the interpreter would give it."""
    import runpy

    sys.argv = [argv[0], *argv[3:]]
    # As `python -m`: the module runs as __main__ only (runpy warns of a copy already imported), and what
    # imports it by name gets it fresh, as in a cold process.
    sys.modules.pop(argv[2], None)
    try:
        runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - as the interpreter: the traceback, exit 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1

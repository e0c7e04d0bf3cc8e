"""The child process that runs one RunSpec: `python -m perfconsole.core.measure.worker --spec JSON`.

Events go to the stdout the launcher gave us, one JSON line each; everything else the process prints
(torch warnings, compile logs) is sent to stderr so it cannot corrupt the stream. An OOM is an `oom`
error event and exit 0; other failures are an error event and exit 1. The worker dies with its parent.

PERFCONSOLE_FAULT injects a failure at a global step index, to test every failure path for real:
`oom:N` raises CUDA's OutOfMemoryError, `raise:N` a RuntimeError, `exit:N` exits 3 without a word,
`kill:N` SIGKILLs the worker, `hang:N` sleeps for an hour, `slow:MS` sleeps MS ms before every step.
In a data-parallel job PERFCONSOLE_RANK_FAULT=<rank>:<kind>:<N> injects the same on one rank alone.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from perfconsole.core import events as ev
from perfconsole.core.measure.start import CLOCK
from perfconsole.core.settings import RunSpec, SpecError


class EventWriter:
    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, event: ev.Event) -> None:
        with self.lock:
            self.stream.write(event.to_json() + "\n")
            self.stream.flush()


def private_stdout() -> TextIO:
    """Keep the real stdout for events and point fd 1 at stderr for everything else."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def _kill_me_with_parent() -> None:
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def hold(emit: EventWriter, preload: Callable[[], object]) -> bool:
    """A worker started ahead of its turn (`--hold`): import what the measurement needs, announce
    `held`, then block until the launcher writes a line to stdin. Nothing here touches a GPU, and
    an idle read uses no CPU, so a held worker cannot disturb the cell being measured. Returns False
    when stdin closes first: the launcher dropped this worker, or is gone."""
    _kill_me_with_parent()
    preload()
    CLOCK.lap("imports")
    emit(ev.Progress(ev.HELD, "imported; waiting for its turn"))
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 1)  # one byte at a time: what follows the line is the parent watch's
        if not chunk:
            return False
        line += chunk
    CLOCK.skip()  # the wait for its turn is no part of the run's start
    return True


HOLD_HELP = "import, then wait for a line on stdin before using the device (a cell started ahead)"


def begin(held: bool, preload: Callable[[], object]) -> EventWriter | None:
    """The opening both workers share: events on a private stdout, the hold of a cell started ahead
    (`--hold`), and death with the parent. None when a held worker was dropped before its turn."""
    emit = EventWriter(private_stdout())
    if held and not hold(emit, preload):
        return None
    die_with_parent()
    return emit


def refuse(emit: EventWriter, message: str) -> int:
    """An input the worker cannot run: a `spec` error, then `finished`; exit code 2."""
    emit(ev.Error("spec", message))
    emit(ev.Finished("error"))
    return 2


def die_with_parent() -> None:
    _kill_me_with_parent()

    def watch_stdin() -> None:
        # The launcher holds our stdin open; EOF means it is gone (even through nsys). The raw fd,
        # not sys.stdin: a daemon thread inside a buffered read aborts interpreter shutdown.
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        os._exit(137)

    threading.Thread(target=watch_stdin, daemon=True, name="parent-watch").start()


def fault_hook(spec_text: str | None):
    if not spec_text:
        return None
    kind, _, arg = spec_text.partition(":")
    n = int(arg or 0)

    def hook(index: int) -> None:
        if kind == "slow":
            time.sleep(n / 1000)
            return
        if index != n:
            return
        if kind == "oom":
            import torch

            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
        if kind == "raise":
            raise RuntimeError("injected failure")
        if kind == "exit":
            os._exit(3)
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "hang":
            time.sleep(3600)

    return hook


def classify(exc: BaseException) -> str:
    import torch

    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return "oom"
    if "cuda" in str(exc).lower() or "cublas" in str(exc).lower():
        return "cuda"
    return "crash"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="perfconsole-worker")
    parser.add_argument("--spec", required=True, help="RunSpec as JSON")
    parser.add_argument("--out-dir", default=None, help="where profiler and memory files go")
    parser.add_argument("--hold", action="store_true", help=HOLD_HELP)
    args = parser.parse_args(argv)
    from perfconsole.core.measure import gc_control

    gc_control.space()  # before torch's imports (core/measure/gc_control.py)
    emit = begin(args.hold, lambda: importlib.import_module("perfconsole.core.measure.bench"))
    if emit is None:
        return 0

    try:
        spec = RunSpec.from_dict(json.loads(args.spec)).validate()
    except (SpecError, ValueError, TypeError) as exc:
        return refuse(emit, str(exc))

    from perfconsole.core.measure import bench

    gc_control.settle()  # torch and the bench imported, cold or forked alike (core/measure/gc_control.py)
    out_dir = Path(args.out_dir) if args.out_dir else None
    if spec.nproc > 1:
        return run_rank(emit, spec, out_dir)
    hook = fault_hook(os.environ.get("PERFCONSOLE_FAULT"))
    return serve(emit, spec.device, spec.to_dict(), lambda env: bench.run(spec, emit, env, out_dir, hook))


def serve(emit: EventWriter, device: str, started: dict, body) -> int:
    """A worker's life once its input is valid: check the device, announce the run, run `body(env)`,
    and turn any failure into events. Returns the exit code: 0 ok or OOM, 1 other failures."""
    import torch

    from perfconsole.core.measure.environment import collect

    if device == "cuda" and not torch.cuda.is_available():
        emit(ev.Error("cuda", f"CUDA is not available here (torch {torch.__version__} sees no GPU); "
                              "choose the cpu device"))
        emit(ev.Finished("error"))
        return 1
    env = collect(device)
    CLOCK.lap("imports")
    emit(ev.RunStarted(started, env.to_dict(), os.getpid()))
    from perfconsole.core.measure import Unsupported
    from perfconsole.model.sources import ModelError

    try:
        body(env)
    except ModelError as exc:  # the model named cannot be built or breaks its contract: bad input, one line
        emit(ev.Error("spec", str(exc)))
        emit(ev.Finished("error"))
        return 2
    except Unsupported as exc:  # not a failure: this machine lacks what the spec asks for, and says what
        emit(ev.Error("unsupported", f"unsupported: {exc}"))
        emit(ev.Finished("unsupported"))
        return 0
    except Exception as exc:  # every failure becomes an event; the launcher keeps the steps so far
        kind = classify(exc)
        emit(ev.Error(kind, str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                      traceback.format_exc(limit=8)))
        emit(ev.Finished("oom" if kind == "oom" else "error"))
        return 0 if kind == "oom" else 1
    emit(ev.Finished("ok"))
    return 0


def run_rank(emit: EventWriter, spec: RunSpec, out_dir: Path | None) -> int:
    """One rank of a data-parallel job under torchrun. Only rank 0 speaks. A failure on any rank is
    raised out of torch's `record`, which writes it to the error file torchrun gave this rank
    (TORCHELASTIC_ERROR_FILE) and exits non-zero, so torchrun's agent stops the other ranks (a rank
    left waiting in a collective would wait for the timeout) and the launcher names the rank that
    failed first (core.launch.torchrun)."""
    import torch
    from torch.distributed.elastic.multiprocessing.errors import record

    from perfconsole.core.measure import bench, data_parallel
    from perfconsole.core.measure.environment import collect
    from perfconsole.core.measure.job import Job

    @record
    def job() -> None:
        if spec.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"CUDA is not available here (torch {torch.__version__} sees no GPU)")
        rank = data_parallel.init(spec)
        say = emit if rank.is_main else (lambda _event: None)
        env = collect(spec.device)
        CLOCK.lap("imports")
        say(ev.RunStarted(spec.to_dict(), env.to_dict(), os.getpid()))
        hook = fault_hook(data_parallel.rank_fault() or os.environ.get("PERFCONSOLE_FAULT"))
        bench.run(spec, say, env, out_dir, hook, job=Job(spec, rank))
        # Only after a clean run: tearing down a group whose peer has died can block, and torchrun
        # ends every rank of a failed job anyway.
        data_parallel.shutdown()
        say(ev.Finished("ok"))

    job()
    return 0


def end(code: int, argv: list[str]) -> None:
    """Exit with `code`. Every event is written and flushed by now, and what a run keeps (snapshots, traces)
    is written before its events say so: the interpreter's teardown of torch, 0.7 s after every run on a
    2-core machine that the launcher waits for, is skipped (os._exit), as a forked worker's is. Under nsys
    or ncu the process ends the usual way, since their libraries gather what they captured as it ends."""
    try:
        profiler = json.loads(argv[argv.index("--spec") + 1]).get("profile")
    except (ValueError, IndexError, AttributeError):  # a spec the worker refused: nothing was profiled
        profiler = None
    if profiler in ("nsys", "ncu"):
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == "__main__":
    end(main(), sys.argv[1:])

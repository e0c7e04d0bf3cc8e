"""A data-parallel run's processes: the worker under torchrun, and the rank that failed.

torchrun (`python -m torch.distributed.run`, PyTorch's elastic agent) starts `nproc` copies of the
worker with RANK, LOCAL_RANK and WORLD_SIZE set, on a rendezvous of its own on a free local port
(`--standalone`), and restarts nothing (`--max-restarts 0`): a benchmark that crashed is reported,
not retried. When one rank fails the agent stops the others and exits non-zero. Each rank that
raised leaves its exception in `<log-dir>/<run id>/attempt_0/<local rank>/error.json` (torch's
`record` decorator, core.measure.worker.run_rank); the first written is the root cause, and its
rank is named in the run's error. The ranks' stdout and stderr are not redirected: rank 0's events
reach the launcher's pipe as a single worker's would, and the others say nothing on stdout.
"""
from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from perfconsole.core import events as ev


def torchrun_command(nproc: int, log_dir: Path, argv: list[str]) -> list[str]:
    """torchrun around a full command line (`--no-python`: argv names its own interpreter, or nsys)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(nproc), "--max-restarts", "0", "--monitor-interval", "0.5",
            "--log-dir", str(log_dir), "--no-python", *argv]


def first_failure(log_dir: Path) -> tuple[int, dict] | None:
    """(local rank, error.json content) of the earliest error file under torchrun's log dir."""
    found = []
    for path in log_dir.glob("*/attempt_*/*/error.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found.append((path.stat().st_mtime_ns, int(path.parent.name), data))
        except (OSError, ValueError):
            continue  # a file still being written by a rank that was stopped: not the root cause
    if not found:
        return None
    _, rank, data = min(found, key=lambda f: (f[0], f[1]))
    return rank, data


def _message(data: dict) -> tuple[str, str]:
    msg = data.get("message")
    if isinstance(msg, dict):
        text = str(msg.get("message", ""))
        stack = str((msg.get("extraInfo") or {}).get("py_callstack", ""))
        return text, stack
    return str(msg or ""), ""


def classify_message(text: str) -> str:
    low = text.lower()
    if "outofmemoryerror" in low or "out of memory" in low:
        return "oom"
    if "cuda" in low or "nccl" in low or "cublas" in low:
        return "cuda"
    return "crash"


def root_cause(stderr_tail: list[str]) -> str | None:
    """The rank torchrun's summary names as the root cause of a failed job, and how it ended, in words; None where
    its stderr does not hold that summary. A rank that ended by a signal leaves no error file (it raised nothing):
    the summary is all there is, under "Root Cause (first observed failure):" (rank, exitcode, traceback lines)."""
    start = next((i for i in range(len(stderr_tail) - 1, -1, -1) if "Root Cause" in stderr_tail[i]), None)
    if start is None:
        return None
    block = "\n".join(stderr_tail[start:])
    rank, code = re.search(r"^\s*rank\s*:\s*(\d+)", block, re.M), re.search(r"^\s*exitcode\s*:\s*(-?\d+)", block, re.M)
    if rank is None or code is None:
        return None
    exit_code = int(code.group(1))
    if exit_code >= 0:
        return f"rank {rank.group(1)} exited with code {exit_code}"
    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = f"signal {-exit_code}"
    return f"rank {rank.group(1)} was killed by {name}" + (SIGKILL_WORDS if name == "SIGKILL" else "")


# Nothing in a run sends SIGKILL to its own processes; the kernel's out-of-memory killer does, or a person.
SIGKILL_WORDS = (" (sent from outside: the kernel's out-of-memory killer sends it when the machine's memory runs out; "
                 "fewer processes, or a smaller model or batch, need less)")


def failure_events(log_dir: Path, code: int, stderr_tail: list[str]) -> Iterator[ev.Event]:
    """The error and the end of a job that ended without rank 0's `finished`: the rank that failed
    first, what it raised and how (oom, cuda, crash); else torchrun's exit code and its last words."""
    failure = first_failure(log_dir)
    tail = "\n".join(stderr_tail)
    if failure is not None:
        rank, data = failure
        text, stack = _message(data)
        kind = classify_message(text)
        first = text.splitlines()[0] if text else "failed"
        yield ev.Error(kind, f"rank {rank}: {first}", f"{stack}\n{tail}".strip())
        yield ev.Finished("oom" if kind == "oom" else "error")
        return
    how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
    cause = root_cause(stderr_tail)
    # torchrun's last words, its banner lines of = or - aside
    last = cause or next((ln.strip() for ln in reversed(stderr_tail) if ln.strip().strip("=-")), "")
    yield ev.Error("crash", f"torchrun {how} before the job finished{': ' + last if last else ''}", tail)
    yield ev.Finished("error")

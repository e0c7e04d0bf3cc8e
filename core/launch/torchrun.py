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
    last = next((ln for ln in reversed(stderr_tail) if ln.strip()), "")
    how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
    yield ev.Error("crash", f"torchrun {how} before the job finished{': ' + last if last else ''}", tail)
    yield ev.Finished("error")

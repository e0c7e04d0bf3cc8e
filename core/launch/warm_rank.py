"""A torchrun rank that starts warm: `python -m perfconsole.core.launch.warm_rank python -m <worker> ...`.

torchrun starts each rank as a process of its own, sets its environment (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, ...), watches its exit code and stops it with signals. This process stands where the rank would:
it imports no torch, asks a warm process (core.launch.warm) to fork the worker with this process's stdin,
stdout, stderr, environment and directory, passes every stop signal torchrun sends on to the worker's process
group, and ends as the worker ended (its exit code, or killed by the same signal). Killed itself (SIGKILL),
its connection to the warm process closes, and the warm process kills the worker's group: nothing outlives
the job. Where no warm process takes the rank (none is up, it is off, or the run's environment differs from
the one torch was imported under), it becomes the worker cold (exec: the same pid, as torchrun knows it), and
the record's `start` says why.
"""
from __future__ import annotations

import os
import signal
import sys

from perfconsole.core.launch import warm

FORWARD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "-m":
        print("usage: python -m perfconsole.core.launch.warm_rank PYTHON -m MODULE [ARGS...]", file=sys.stderr)
        return 2
    proc, why = warm.spawn(argv, dict(os.environ), fds=[0, 1, 2])
    if proc is None:
        os.environ[warm.START_VAR] = f"cold: {why}"
        os.execv(argv[0], argv)
    pid = proc.pid

    def forward(signum: int, _frame: object) -> None:
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARD:
        signal.signal(sig, forward)
    code = proc.wait()
    proc.release()
    if code < 0:  # ended by a signal: end by it too, so torchrun reads what it would have of the rank
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

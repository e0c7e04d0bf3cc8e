"""Where a worker's first seconds go: its start phases, each with its seconds, from the process's start to the
first measured step (core.events.StartPhases).

`imports` runs from the process's start (the kernel's start time of this process, read from /proc/self/stat
against the boot-time clock it is counted on) to the worker's first event, so the interpreter's own start is in
it; a worker forked from a warm process starts at its fork, and a held worker (`--hold`) does not count its wait.
Then, in the order they happen: `peaks` (a GPU's, before the model), `build`, `flops`, one phase per converter
that applies (named for its setting), `compile`, the `first step` and the `rest of warm-up`. torch.compile
compiles lazily, inside the steps (the forward's graph in the first forward, the backward's in the first
backward), so `compile` is the compiler's own seconds during the warm-up, read from dynamo's timers, and the
steps' phases are their wall time less the compile inside them: the phases still add up to the time that passed.
"""
from __future__ import annotations

import os
import sys
import time

# dynamo's timers (torch._dynamo.utils.compilation_time_metrics) that hold a compile's whole time without counting
# a second apart twice: a frame's compile (the forward and, unless it is lazy, the backward), and the backward's
# lazy compile, which runs in the first backward, outside any frame's.
_COMPILE_TIMERS = ("_compile.compile_inner",)
_LAZY_BACKWARD = "bw_compiler"


def process_age() -> float | None:
    """Seconds since this process started, or None where the kernel does not say (not Linux)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            stat = f.read()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime, after the command's name
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def compile_seconds() -> float:
    """The seconds torch's compiler has spent in this process so far (0 where torch's compiler was never loaded)."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return 0.0
    metrics = getattr(utils, "compilation_time_metrics", {})
    return float(sum(sum(v) for k, v in metrics.items() if k in _COMPILE_TIMERS or k.endswith(_LAZY_BACKWARD)))


class StartClock:
    """The start's phases in the order they end: `lap(name)` closes the phase `name` now."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.last: float | None = None
        self.compiled = 0.0   # compile seconds already given to a phase

    def lap(self, name: str, compiled: float = 0.0) -> None:
        """Close `name`: the seconds since the last lap (the first lap: since the process started), added to what
        `name` has already; of them, `compiled` seconds go to `compile` instead."""
        now = time.monotonic()
        seconds = process_age() if self.last is None else now - self.last
        self.last = now
        if seconds is None:
            return
        compiled = min(compiled, seconds)
        if compiled > 0:
            self.phases["compile"] = self.phases.get("compile", 0.0) + compiled
        self.phases[name] = self.phases.get(name, 0.0) + seconds - compiled

    def begin(self) -> None:
        """A run's phases begin. Those its worker closed before (imports) stay; in a process no worker opened (a
        test's), the clock starts now."""
        if self.last is None:
            self.phases, self.last, self.compiled = {}, time.monotonic(), compile_seconds()

    def take(self) -> dict[str, float]:
        """The phases so far, and a clock ready for the next run in this process."""
        phases, self.phases, self.last = self.phases, {}, None
        self.compiled = compile_seconds()
        return phases

    def skip(self) -> None:
        """What passed since the last lap is no phase (a held worker's wait for its turn)."""
        self.last = time.monotonic()

    def lap_steps(self, name: str) -> None:
        """Close a phase of steps: the compile that ran inside it is `compile`, the rest is `name`."""
        total = compile_seconds()
        self.lap(name, total - self.compiled)
        self.compiled = total


CLOCK = StartClock()  # the worker's one clock: the worker opens it, the bench closes the phases


"""The host under the measured steps: what the thread that issued them got of the CPU, in figures.

A host-paced step (the host's issue as long as the step: xl on an H200) is as fast as that thread runs, and
processes of one program have run 1.7 times apart on one machine (docs/results/four_gpus_truth_h200.md). The
record says, per process, over its measured steps: the issuing thread's CPU seconds against the wall's (a share
under 1 is time the thread was not running: waiting on the GPU, or taken off its CPU), its context switches
(involuntary ones are the scheduler's preemptions), the steal the hypervisor reported for the machine's CPUs and
for the CPU the thread started on (/proc/stat: time a virtual CPU was ready but the host ran something else), and
the CPUs it ran on at the start and end. Linux only; each figure is None where the kernel does not say.
"""
from __future__ import annotations

import os
import time

try:
    import resource
except ImportError:  # not on Windows: the switches are then None
    resource = None  # type: ignore[assignment]

from perfconsole.core import events as ev


def _cpu_now() -> int | None:
    """The CPU this thread is running on (field 39 of /proc/thread-self/stat)."""
    try:
        with open("/proc/thread-self/stat", encoding="ascii") as f:
            return int(f.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _steal(cpu: int | None) -> dict[str, tuple[int, int]]:
    """(steal, total) jiffies from /proc/stat: the machine's (`all`) and, where named, one CPU's."""
    out: dict[str, tuple[int, int]] = {}
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                name, *values = line.split()
                if not name.startswith("cpu"):
                    break
                key = "all" if name == "cpu" else name[3:]
                if key == "all" or key == str(cpu):
                    ticks = [int(v) for v in values[:8]]  # user nice system idle iowait irq softirq steal
                    if len(ticks) == 8:
                        out[key] = (ticks[7], sum(ticks))
    except (OSError, ValueError):
        pass
    return out


def _share(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


class HostWatch:
    """`start()` before the measured steps and `stop()` after them, on the thread that issues them."""

    def start(self) -> HostWatch:
        self.cpu = _cpu_now()
        self.steal = _steal(self.cpu)
        self.usage = _thread_usage()
        self.cpu_s = time.thread_time()
        self.wall = time.perf_counter()
        return self

    def stop(self) -> ev.HostTime:
        wall = time.perf_counter() - self.wall
        cpu_s = time.thread_time() - self.cpu_s
        usage = _thread_usage()
        steal = _steal(self.cpu)
        switches = (None, None) if usage is None or self.usage is None else (
            usage.ru_nvcsw - self.usage.ru_nvcsw, usage.ru_nivcsw - self.usage.ru_nivcsw)
        try:
            allowed = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            allowed = None
        key = None if self.cpu is None else str(self.cpu)
        return ev.HostTime(os.getpid(), wall, cpu_s, switches[0], switches[1],
                           _share(self.steal.get("all"), steal.get("all")),
                           _share(self.steal.get(key or ""), steal.get(key or "")), [self.cpu, _cpu_now()], allowed)


def _thread_usage():
    who = getattr(resource, "RUSAGE_THREAD", None)  # Linux: this thread alone
    if who is None:
        return None
    try:
        return resource.getrusage(who)
    except OSError:
        return None

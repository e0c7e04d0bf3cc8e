"""Running a gate: rounds until every metric's verdict is decided or the budget is spent.

The first MIN_ROUNDS rounds always run (an interval needs three samples a side); then a round is added while
any metric is inconclusive and the budget allows another: `--budget 8` is 8 processes of each program (8
paired processes), `--budget 60s` stops before a round that would end past 60 s of the gate's wall time,
counted from its start (checkouts included), if it took as long as the slowest round so far.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from perfconsole.core.gate.programs import Program
from perfconsole.core.gate.record import GateRecord
from perfconsole.core.gate.rounds import GateRounds
from perfconsole.core.gate.verdict import HIGHER_IS_BETTER, MetricVerdict, Threshold, decided, judge
from perfconsole.core.launch.interleave import OnEvent
from perfconsole.core.record import RunRecord
from perfconsole.core.stats import SPEEDUP_MIN_N, Stat
from perfconsole.core.run_summary import Summary

MIN_ROUNDS = SPEEDUP_MIN_N
# The summary fields `--metric` may name: each process's figure (a step statistic's median).
METRICS = tuple(f.name for f in fields(Summary) if str(f.type) in ("float", "float | None", "Stat", "Stat | None"))
UNITS = {"tokens_per_s": "tokens/s", "achieved_tflops": "TFLOP/s", "mfu": "", "flops_per_step": "FLOP",
         "peak_allocated_mib": "MiB", "peak_reserved_mib": "MiB"}
MEMORY = (("peak allocated", "peak_allocated_mib"), ("peak reserved", "peak_reserved_mib"))


@dataclass(frozen=True)
class Budget:
    seconds: float | None = None
    processes: int | None = None

    @classmethod
    def parse(cls, text: str) -> Budget:
        """`60s`, `2m` or `90` seconds-with-unit, or a bare count of processes (`8`)."""
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|min)?\s*", text)
        if not m or (m.group(2) is None and "." in m.group(1)):
            raise ValueError(f"--budget: give seconds (60s, 2m) or a count of processes (8), not {text!r}")
        if m.group(2):
            return cls(seconds=float(m.group(1)) * (60 if m.group(2) != "s" else 1))
        if int(m.group(1)) < MIN_ROUNDS:
            raise ValueError(f"--budget: at least {MIN_ROUNDS} processes of each program, not {m.group(1)}")
        return cls(processes=int(m.group(1)))

    def text(self) -> str:
        return f"{self.seconds:g}s" if self.seconds is not None else f"{self.processes} processes"


@dataclass(frozen=True)
class Settings:
    threshold: Threshold
    memory_threshold: Threshold
    budget: Budget
    paired: bool = False
    metrics: tuple[str, ...] = ()


def _value(summary: Summary | None, name: str) -> float | None:
    value = getattr(summary, name, None) if summary is not None else None
    return value.median if isinstance(value, Stat) else value


def _per_process(runs: list[RunRecord], name: str) -> list[tuple[float | None, float | None]]:
    """(A's, B's) figure of each round whose processes both ended well."""
    a, b = runs
    return [(_value(x.summary, name), _value(y.summary, name)) for x, y in zip(a.replicates, b.replicates)
            if x.status == "ok" and y.status == "ok"]


def step_pairs(runs: list[RunRecord], paired: bool) -> list[tuple[float, float]]:
    """The samples of step time: each round's medians, or in paired mode every pair of steps."""
    if not paired:
        return _per_process(runs, "total_ms")  # type: ignore[return-value]
    a, b = runs
    return [(s.total_ms, t.total_ms) for x, y in zip(a.replicates, b.replicates) for s, t in zip(x.steps, y.steps)]


def verdicts(runs: list[RunRecord], settings: Settings) -> list[MetricVerdict]:
    out = [judge("step time", "ms", step_pairs(runs, settings.paired), settings.threshold,
                 method="median" if settings.paired else "t")]
    for label, name in MEMORY:
        if settings.paired:
            out.append(replace(judge(label, "MiB", [], settings.memory_threshold),
                               note="paired mode: both programs share one process's memory; gate memory in processes"))
        else:
            out.append(judge(label, "MiB", _per_process(runs, name), settings.memory_threshold))
    for name in settings.metrics:
        out.append(judge(name, UNITS.get(name, "ms"), _per_process(runs, name), settings.threshold,
                         higher_is_better=name in HIGHER_IS_BETTER))
    return out


def run_gate(programs: list[Program], settings: Settings, started: float | None = None,
             on_event: OnEvent | None = None, on_round: Callable[[int, list[MetricVerdict]], None] | None = None,
             rounds: GateRounds | None = None) -> GateRecord:
    """Run rounds (see the module's doc) and return the gate's record; `rounds` lets a caller hold the runner
    to cancel it (GateRounds.cancel) from a signal handler."""
    started = time.monotonic() if started is None else started
    runner = rounds or GateRounds(programs, settings.paired)
    budget, r, stopped = settings.budget, 0, "decided"
    slowest = 0.0
    while True:
        began = time.monotonic()
        runner.round(r, on_event)
        slowest = max(slowest, time.monotonic() - began)
        r += 1
        if runner.cancelled or any(s != "ok" for s in runner.status):
            stopped = "cancelled" if runner.cancelled else "failed"
            break
        now = verdicts(runner.records, settings)
        if on_round is not None:
            on_round(r, now)
        if r < MIN_ROUNDS:
            continue
        if decided(now):
            break
        if (budget.processes is not None and r >= budget.processes) or \
                (budget.seconds is not None and time.monotonic() - started + slowest > budget.seconds):
            stopped = "budget"
            break
    records = runner.finish(on_event)
    return GateRecord("paired" if settings.paired else "processes", [p.to_dict() for p in programs], records,
                      verdicts(records, settings), r, round(time.monotonic() - started, 2), budget.text(), stopped)

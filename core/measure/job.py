"""What the timed loop (core.measure.bench) does differently on one rank of a data-parallel job.

Every rank runs the same loop. After each step's timing is complete, every rank's step goes to rank 0
(core.measure.distributed.gather), which emits them all (`rank_steps`) and, as the job's step, the
slowest rank's: a synchronous data-parallel step is as slow as its slowest rank. The job's step
carries that rank's number and its `comm_ms`. Other ranks emit nothing (their emitter drops events).
"""
from __future__ import annotations

import dataclasses

from collections.abc import Callable
from pathlib import Path

import torch

from perfconsole.core import events as ev
from perfconsole.core.measure import distributed
from perfconsole.core.spec import RunSpec

Emit = Callable[[ev.Event], None]
COMM_FREE_STEPS = 10


class Job:
    def __init__(self, spec: RunSpec, rank: distributed.Rank) -> None:
        self.spec = spec
        self.rank = rank
        self.timer: distributed.CommTimer | None = None
        self.ddp: torch.nn.Module | None = None
        self.comm_free_ms: list[float] | None = None

    @property
    def device(self) -> torch.device:
        return self.rank.device

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        wrapped, self.timer = distributed.wrap_model(self.spec, model, self.rank)
        if self.timer is not None:
            self.ddp = wrapped
        return wrapped

    def begin(self) -> None:
        if self.timer is not None:
            self.timer.begin()

    def publish(self, step: ev.Step, emit: Emit) -> ev.Step:
        """Attach this rank's comm_ms, gather every rank's step on rank 0, emit them; returns the job's
        step on rank 0 (the slowest rank's) and this rank's own elsewhere."""
        comm = self.timer.step_ms() if self.timer is not None else None
        mine = dataclasses.replace(step, comm_ms=comm, rank=self.rank.rank)
        everyone = distributed.gather(self.rank, dataclasses.asdict(mine))
        if everyone is None:
            return mine
        emit(ev.RankSteps(step.index, step.warmup, everyone))
        slowest = max(everyone, key=lambda s: s["total_ms"])
        job_step = ev.Step(**slowest)
        emit(job_step)
        return job_step

    def comm_free(self, run_step: Callable[[], ev.Step], emit: Emit) -> None:
        """DDP only: the same step without the all-reduce (`no_sync`), timed on every rank; the slowest
        rank's time per step is what the job would take if no communication were waited for."""
        if self.ddp is None:
            return
        emit(ev.Progress("comm_free", "the same steps without the gradient all-reduce"))
        times: list[float] = []
        for _ in range(min(self.spec.steps, COMM_FREE_STEPS)):
            with distributed.no_sync(self.ddp):
                step = run_step()
            everyone = distributed.gather(self.rank, {"total_ms": step.total_ms})
            if everyone is not None:
                times.append(max(s["total_ms"] for s in everyone))
        if self.rank.is_main:
            self.comm_free_ms = times
            emit(ev.CommFree(times))

    def out_dir(self, out_dir: Path | None) -> Path | None:
        """Each rank's profiler files in a folder of its own."""
        return None if out_dir is None else out_dir / f"rank-{self.rank.rank}"

    def overlap(self, trace_files: list[str], emit: Emit) -> None:
        """Each rank's communication/compute overlap from its own profile trace, gathered on rank 0."""
        from perfconsole.core.profiling.overlap import trace_overlap

        mine: dict = {"rank": self.rank.rank, "trace": trace_files[0] if trace_files else None}
        if trace_files:
            mine.update(trace_overlap(trace_files[0]).to_dict())
        everyone = distributed.gather(self.rank, mine)
        if everyone is not None:
            emit(ev.Overlap(everyone))

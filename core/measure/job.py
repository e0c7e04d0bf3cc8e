"""What the timed loop (core.measure.bench) does differently on one rank of a data-parallel job.

Every rank runs the same loop. After each step's timing is complete, every rank's step goes to rank 0
(core.measure.step_exchange: posted without waiting, read a step later, so no rank's host waits for
another's), which emits them all (`rank_steps`) and, as the job's step, the slowest rank's: a synchronous
data-parallel step is as slow as its slowest rank. Other ranks emit nothing (their emitter drops events).

The quiet steps are the user's program: DDP as configured, nothing timing its collectives. After them,
DDP runs steps of its own with the communication timer on (`comm_steps`: time in collectives, and
what timing them cost against the quiet step) and steps without the all-reduce (`comm_free`: the
step if no communication were waited for). Then DDP or FSDP runs the step's collectives alone, and
the link's bus bandwidth is measured (core.measure.collectives).
"""
from __future__ import annotations

import dataclasses
from datetime import timedelta

from collections.abc import Callable
from pathlib import Path

import torch

from perfconsole.core import events as ev
from perfconsole.core.measure import data_parallel
from perfconsole.core.measure.step_exchange import StepExchange
from perfconsole.core.settings import RunSpec

Emit = Callable[[ev.Event], None]
COMM_STEPS = 10  # steps with the timer on, and steps without the all-reduce
FLUSH_FAILED = timedelta(seconds=20)


class Job:
    def __init__(self, spec: RunSpec, rank: data_parallel.Rank) -> None:
        self.spec = spec
        self.rank = rank
        self.timer: data_parallel.CommTimer | None = None
        self.ddp: torch.nn.Module | None = None
        self.wrapped: torch.nn.Module | None = None
        self.comm_free_ms: list[float] | None = None
        self.comm_steps_ms: dict[str, list] | None = None
        self._exchange = StepExchange(rank.exchange, rank.rank, rank.world_size)
        self._sent: list[ev.Step] = []  # this rank's steps whose exchange is not complete yet, in order

    @property
    def device(self) -> torch.device:
        return self.rank.device

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        wrapped, self.timer = data_parallel.wrap_model(self.spec.section("parallel"), model, self.rank)
        self.wrapped = wrapped
        if self.spec.parallel == "ddp":
            self.ddp = wrapped  # its steps without the all-reduce; its collectives timed where a timer can
        return wrapped

    def publish(self, step: ev.Step, emit: Emit) -> list[ev.Step]:
        """Send this rank's step towards rank 0 (core.measure.step_exchange: no rank waits for another's host);
        the steps whose exchange is complete, in order: on rank 0 the job's (the slowest rank's, after emitting
        every rank's), elsewhere this rank's own."""
        self._sent.append(dataclasses.replace(step, rank=self.rank.rank))
        return self._received(self._exchange.post(self._sent[-1]), emit)

    def flush(self, emit: Emit) -> list[ev.Step]:
        """The steps still in the exchange, once every rank has sent them."""
        return self._received(self._exchange.flush(), emit)

    def flush_failed(self, emit: Emit) -> list[ev.Step]:
        """After this rank failed: what it had already sent still reaches rank 0 (a step the job finished is
        never lost); waits at most FLUSH_FAILED for the other ranks, then gives up without a word."""
        try:
            return self._received(self._exchange.flush(FLUSH_FAILED), emit)
        except Exception:  # another rank is gone too: its part of the gather never comes
            return []

    def _received(self, gathered: list[list[dict] | None], emit: Emit) -> list[ev.Step]:
        out = []
        for everyone in gathered:
            mine = self._sent.pop(0)
            if everyone is None:
                out.append(mine)
                continue
            emit(ev.RankSteps(mine.index, mine.warmup, everyone))
            job_step = ev.Step(**max(everyone, key=lambda s: s["total_ms"]))
            emit(job_step)
            out.append(job_step)
        return out

    def most_alloc_retries(self, retries: int) -> int:
        """Every rank's allocator retries on rank 0, which speaks for the job with the busiest rank's count."""
        everyone = data_parallel.gather(self.rank, {"alloc_retries": retries})
        return retries if everyone is None else max(r["alloc_retries"] for r in everyone)

    def after_quiet(self, run_step: Callable[[], ev.Step], run_steps: Callable[[int], list[ev.Step]],
                    emit: Emit) -> None:
        """After the quiet steps: for DDP the steps with the collectives timed and those without the
        all-reduce; then, DDP or FSDP, the step's collectives alone."""
        self.comm_steps(run_step, emit)
        self.comm_free(run_steps, emit)
        self.collectives(emit)

    def collectives(self, emit: Emit) -> None:
        if self.wrapped is None:
            return
        from perfconsole.core.measure import collectives

        emit(ev.Progress("collectives", "the step's collectives alone, and the link's bus bandwidth"))
        found = collectives.measure(self.wrapped, self.spec.parallel, self.spec.comm_hook, self.device,
                                    self.rank.world_size, self.rank.exchange, self.spec.reshard,
                                    self.spec.fsdp_bf16, self.spec.zero, self.spec.zero2)
        if self.rank.is_main:
            emit(ev.Collectives(found))

    def comm_steps(self, run_step: Callable[[], ev.Step], emit: Emit) -> None:
        """DDP only: steps with the communication timer on, each synchronised and read; rank 0 emits the
        job's step (slowest rank) and that rank's time in collectives, per step."""
        if self.ddp is None or self.timer is None:
            return
        emit(ev.Progress("comm_steps", "steps with their collectives timed"))
        data_parallel.time_comm(self.ddp, self.timer)
        totals: list[float] = []
        comms: list[float | None] = []
        try:
            for _ in range(min(self.spec.steps, COMM_STEPS)):
                self.timer.begin()
                step = run_step()
                everyone = data_parallel.gather(self.rank, {"total_ms": step.total_ms, "comm_ms": self.timer.step_ms()})
                if everyone is not None:
                    slowest = max(everyone, key=lambda s: s["total_ms"])
                    totals.append(slowest["total_ms"])
                    comms.append(slowest["comm_ms"])
        finally:
            self.timer.on = False
        if self.rank.is_main:
            self.comm_steps_ms = {"total_ms": totals, "comm_ms": comms}
            emit(ev.CommSteps(totals, comms))

    def comm_free(self, run_steps: Callable[[int], list[ev.Step]], emit: Emit) -> None:
        """DDP only: steps without the all-reduce (`no_sync`), run as the quiet steps were, after one warm-up step
        not counted (without the all-reduce a compiled backward is a graph of its own: compiled autograd compiles it
        in that step); the slowest rank's time per step is what the job would take if no communication were waited
        for."""
        if self.ddp is None:
            return
        emit(ev.Progress("comm_free", "the same steps without the gradient all-reduce"))
        with data_parallel.no_sync(self.ddp):
            warm = run_steps(1)
            if self.rank.is_main:
                emit(ev.Progress("comm_free", f"its warm-up step, not counted: {warm[0].total_ms:.1f} ms"))
            done = run_steps(min(self.spec.steps, COMM_STEPS))
        times: list[float] = []
        for step in done:
            everyone = data_parallel.gather(self.rank, {"total_ms": step.total_ms})
            if everyone is not None:
                times.append(max(s["total_ms"] for s in everyone))
        if self.rank.is_main:
            self.comm_free_ms = times
            emit(ev.CommFree(times))

    def out_dir(self, out_dir: Path | None) -> Path | None:
        """Each rank's profiler files in a folder of its own."""
        return None if out_dir is None else out_dir / f"rank-{self.rank.rank}"

    def overlap(self, trace_files: list[str], emit: Emit, events: list | None = None) -> None:
        """Each rank's communication/compute overlap from its own profile trace (its events, where the caller
        parsed them already), gathered on rank 0."""
        from perfconsole.core.profiling.overlap import events_overlap, trace_overlap

        mine: dict = {"rank": self.rank.rank, "trace": trace_files[0] if trace_files else None}
        if trace_files:
            mine.update((events_overlap(events) if events is not None else trace_overlap(trace_files[0])).to_dict())
        everyone = data_parallel.gather(self.rank, mine)
        if everyone is not None:
            emit(ev.Overlap(everyone))

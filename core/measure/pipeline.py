"""Queuing a step's phases between marks, and reading the marks back: the timed loop's clock.

On CUDA the marks are events recorded on the stream, so a phase's time is GPU time between its
marks; on the CPU a monotonic clock is read. `StepPipeline` decides when marks are read: with a step
in flight (the default on CUDA) or with a synchronisation after every step (`--step-sync`).
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ContextManager, Protocol

import torch

from perfconsole.core import events as ev
from perfconsole.core.settings import RunSpec


def steps_text(n: int) -> str:
    """"1 step", "3 steps": progress reads as a sentence."""
    return f"{n} step" if n == 1 else f"{n} steps"


class Stepper(Protocol):
    """One step of a spec's mode in phases (core.measure.bench.Stepper)."""
    spec: RunSpec
    device: torch.device
    optimizer: Any
    graphs: bool             # CUDA graphs (compile mode reduce-overhead) replay into the same outputs
    around_step: Callable[[], ContextManager]  # what the forward and backward run inside (compiled autograd)

    def zero_grad(self) -> None: ...
    def forward(self) -> torch.Tensor: ...
    def backward(self, loss: torch.Tensor) -> None: ...
    def optimizer_step(self) -> None: ...


StepHook = Callable[[int], None]


class PhaseClock:
    """Marks between phases: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: list[Any] = []

    def mark(self) -> None:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append(e)
        else:
            self.marks.append(time.perf_counter())

    def intervals_ms(self) -> list[float]:
        if self.cuda:
            self.marks[-1].synchronize()
            return [a.elapsed_time(b) for a, b in zip(self.marks, self.marks[1:])]
        return [(b - a) * 1e3 for a, b in zip(self.marks, self.marks[1:])]


class LossCopy:
    """A step's loss on its way to the host, queued right behind the step's last mark.

    Reading a CUDA tensor (float(), .item()) copies it on the stream at the time of reading, behind all the
    work queued since, and waits for that work: with a step in flight, reading step k's loss would wait for
    step k+1 as well, and the host could never run ahead (the step's issue and its GPU tail then add up
    instead of overlapping). Here the copy is queued when the step is, so reading it waits for this step only."""

    def __init__(self, loss: torch.Tensor) -> None:
        kept = loss.detach()
        self.cuda = kept.is_cuda
        if self.cuda:
            self.value = torch.empty(kept.shape, dtype=kept.dtype, pin_memory=True)
            self.value.copy_(kept, non_blocking=True)
            self.copied = torch.cuda.Event()
            self.copied.record()
        else:
            self.value = kept

    def read(self) -> float:
        if self.cuda:
            self.copied.synchronize()
        return float(self.value)


class PendingStep:
    """A step whose work is queued; `resolve()` waits for its last mark (and its loss's copy, queued right
    behind it) and gives its timings."""

    def __init__(self, index: int, warmup: bool, clock: PhaseClock, loss: LossCopy,
                 host_ms: float | None, host_forward_ms: float | None = None,
                 host_backward_ms: float | None = None) -> None:
        self.index, self.warmup, self.clock, self.loss, self.host_ms = index, warmup, clock, loss, host_ms
        self.host_forward_ms, self.host_backward_ms = host_forward_ms, host_backward_ms

    def resolve(self) -> ev.Step:
        phases = self.clock.intervals_ms() + [None, None]
        value = self.loss.read()  # waits for this step's own copy, never for a step queued after it
        return ev.Step(index=self.index, warmup=self.warmup, total_ms=sum(p for p in phases if p is not None),
                       forward_ms=phases[0], backward_ms=phases[1], optimizer_ms=phases[2],
                       loss=value if value == value and abs(value) != float("inf") else None, host_ms=self.host_ms,
                       host_forward_ms=self.host_forward_ms, host_backward_ms=self.host_backward_ms)


def launch_step(stepper: Stepper, index: int, warmup: bool,
                after_phase: Callable[[str], None] | None = None) -> PendingStep:
    """Queue one step with a mark before it and after each phase. `after_phase(name)` runs after each
    phase's end mark (memory profiling reads peaks there)."""
    after = after_phase or (lambda _name: None)
    stepper.zero_grad()
    clock = PhaseClock(stepper.device)
    issued = time.perf_counter()
    clock.mark()
    with stepper.around_step():
        loss = stepper.forward()
        clock.mark()
        forward_issued = time.perf_counter()
        after("forward")
        backward_start = backward_issued = None
        if stepper.spec.mode != "fwd":
            backward_start = time.perf_counter()  # the forward's hook (a memory read) is not the backward's issue
            stepper.backward(loss)
            clock.mark()
            backward_issued = time.perf_counter()
            after("backward")
    if stepper.optimizer is not None:
        stepper.optimizer_step()
        clock.mark()
        after("optimizer_step")
    # The host has issued the whole step; the GPU may not have run it yet. The GPU can only have waited
    # inside the step's span while the host was still issuing it, so span minus this is a lower bound
    # on the GPU's busy time (core.run_summary), with a step in flight or not.
    host_ms = (time.perf_counter() - issued) * 1e3 if clock.cuda else None
    host_forward_ms = (forward_issued - issued) * 1e3 if clock.cuda else None
    host_backward_ms = (backward_issued - backward_start) * 1e3 if clock.cuda and backward_issued else None
    # Queued now, after the last mark: outside every phase, and ahead of the next step (CUDA graphs overwrite
    # their outputs when the next step replays; the copy is ordered before that on the stream).
    kept = LossCopy(loss)
    return PendingStep(index, warmup, clock, kept, host_ms, host_forward_ms, host_backward_ms)


def timed_step(stepper: Stepper, index: int, warmup: bool,
               after_phase: Callable[[str], None] | None = None) -> ev.Step:
    """One step, synchronised at its end."""
    return launch_step(stepper, index, warmup, after_phase).resolve()


class StepPipeline:
    """Runs steps back to back and hands each one's timings back once its GPU work is done.

    With `in_flight`, step k's marks are read only after step k+1 is queued: the host queues the next
    step while the GPU finishes this one, as a training loop that reads nothing back does, and a phase's
    time is the GPU's time for it rather than the GPU waiting for the host to start a step after a
    synchronisation. Without it, every step ends with a synchronisation before the next is queued (as
    a loop that reads the loss every step does). Either way the marks are CUDA events on the stream.
    """

    def __init__(self, stepper: Stepper, in_flight: bool, before_step: StepHook | None = None) -> None:
        self.stepper = stepper
        self.in_flight = in_flight
        self.before_step = before_step
        self.pending: PendingStep | None = None

    def step(self, index: int, warmup: bool, after_phase: Callable[[str], None] | None = None) -> list[ev.Step]:
        """Queue step `index`; the steps whose timings are now known, in order."""
        if self.before_step:
            self.before_step(index)
        queued = launch_step(self.stepper, index, warmup, after_phase)
        done, self.pending = self.pending, queued
        ready = [done.resolve()] if done is not None else []
        return ready if self.in_flight else ready + self.drain()

    def drain(self) -> list[ev.Step]:
        """The step still in flight, once its GPU work is done."""
        pending, self.pending = self.pending, None
        return [pending.resolve()] if pending is not None else []

    def salvage(self) -> list[ev.Step]:
        """After a failure: the step in flight if its marks can still be read (an OOM leaves them
        readable; a CUDA fault does not), so that no finished step is lost."""
        try:
            return self.drain()
        except Exception:
            self.pending = None
            return []

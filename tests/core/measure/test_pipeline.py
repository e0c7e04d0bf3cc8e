"""The step pipeline: every step comes back once, in order, and none is lost when a step fails."""
import contextlib

import pytest
import torch

from perfconsole.core.measure.bench import Stepper, build_model
from perfconsole.core.measure.pipeline import StepPipeline
from perfconsole.core.settings import RunSpec
from helpers import TINY as TINY_RUN

TINY = TINY_RUN.with_(ctx=16, warmup=0, steps=4)


def _stepper(spec: RunSpec = TINY) -> Stepper:
    torch.manual_seed(0)
    return Stepper(spec, build_model(spec, torch.device("cpu")), torch.device("cpu"))


@pytest.mark.parametrize("in_flight", [True, False])
def test_each_step_comes_back_once_in_order(in_flight):
    pipe = StepPipeline(_stepper(), in_flight=in_flight)
    seen = []
    for i in range(5):
        ready = pipe.step(i, warmup=i < 2)
        # In flight, a step's timings arrive with the next one; synchronised, at once.
        assert [s.index for s in ready] == ([i - 1] if i and in_flight else [] if in_flight else [i])
        seen += ready
    seen += pipe.drain()
    assert [s.index for s in seen] == list(range(5))
    assert [s.warmup for s in seen] == [True, True, False, False, False]
    for s in seen:
        assert s.total_ms == pytest.approx(s.forward_ms + s.backward_ms + s.optimizer_ms)
        assert s.forward_ms > 0 and s.backward_ms > 0 and s.optimizer_ms > 0
    assert pipe.drain() == []


def test_a_failing_step_leaves_the_one_in_flight_readable():
    def fail_at_3(index: int) -> None:
        if index == 3:
            raise RuntimeError("injected")

    pipe = StepPipeline(_stepper(), in_flight=True, before_step=fail_at_3)
    seen = []
    with pytest.raises(RuntimeError):
        for i in range(5):
            seen += pipe.step(i, warmup=False)
    assert [s.index for s in seen] == [0, 1]
    assert [s.index for s in pipe.salvage()] == [2]
    assert pipe.salvage() == []


def test_snapshots_from_before_step_sync_existed_read_as_synchronised():
    old = {k: v for k, v in TINY.to_dict().items() if k != "step_sync"}
    assert RunSpec.from_dict(old).step_sync is True
    assert RunSpec.from_dict(TINY.to_dict()).step_sync is False
    assert "step-sync" in TINY.with_(step_sync=True).label()
    with pytest.raises(ValueError, match="step_sync"):
        TINY.with_(step_sync="yes").validate()


class _SleepStepper:
    """A train step of known GPU length and almost no host work: each phase one sleep kernel."""
    spec = RunSpec(size="tiny", mode="train", device="cuda")
    graphs = False
    optimizer = object()
    around_step = contextlib.nullcontext

    def __init__(self, phase_cycles: int) -> None:
        self.device = torch.device("cuda")
        self.cycles = phase_cycles
        self.x = torch.ones((), device=self.device)

    def zero_grad(self) -> None:
        pass

    def forward(self) -> torch.Tensor:
        torch.cuda._sleep(self.cycles)
        return self.x * 2

    def backward(self, loss: torch.Tensor) -> None:
        torch.cuda._sleep(self.cycles)

    def optimizer_step(self) -> None:
        torch.cuda._sleep(self.cycles)


@pytest.mark.gpu
def test_in_flight_reading_a_step_waits_for_that_step_only():
    """Step k's timings and loss are read once step k+1 is queued; the read must not wait for step k+1 too
    (float() of a CUDA loss at read time did: it copies behind the queued step, and the host lost its lead)."""
    import time

    stepper = _SleepStepper(phase_cycles=1)
    pipe = StepPipeline(stepper, in_flight=True)
    for i in range(2):  # warm: CUDA context, the pinned host allocator
        pipe.step(i, warmup=True)
    pipe.drain()
    probe = StepPipeline(stepper, in_flight=False)
    stepper.cycles = 10_000_000
    step_ms = probe.step(0, warmup=True)[0].total_ms
    stepper.cycles = max(1, int(10_000_000 * 150 / step_ms))  # ~150 ms a step, ~50 ms a phase
    torch.cuda.synchronize()
    start = time.perf_counter()
    assert pipe.step(10, warmup=False) == []
    step10 = pipe.step(11, warmup=False)  # queues 11, then reads 10: returns when 10 is done
    read_ms = (time.perf_counter() - start) * 1e3
    assert [s.index for s in step10] == [10] and step10[0].loss == 2.0
    gpu_ms = step10[0].total_ms
    pipe.drain()
    # Step 10 alone took gpu_ms; waiting for step 11 as well would take about twice that.
    assert read_ms < 1.5 * gpu_ms, f"reading step 10 took {read_ms:.1f} ms for a {gpu_ms:.1f} ms step"

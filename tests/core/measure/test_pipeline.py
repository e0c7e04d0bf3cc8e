"""The step pipeline: every step comes back once, in order, and none is lost when a step fails."""
import pytest
import torch

from perfconsole.core.measure.bench import Stepper, build_model
from perfconsole.core.measure.pipeline import StepPipeline
from perfconsole.core.spec import RunSpec

TINY = RunSpec(size="tiny", ctx=16, batch=2, mode="train", device="cpu", warmup=0, steps=4)


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

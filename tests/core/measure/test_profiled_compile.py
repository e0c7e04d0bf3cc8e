"""A compiled run's profiled steps run the program its quiet steps ran, with no recompile: switching the
profiler's ranges on must not fail a guard of the compiled model (the model's own ranges stay off under compile, and
the check that keeps them off reads only that switch). Before, the first profiled step re-traced the model (its
`annotate` read the range factory, a global that profiling sets), so a compiled run's profile showed dynamo's
tracing as its top row and its first profiled step took 2,241 ms against 15-17 ms quiet steps (small, H200:
tests/fixtures/nsys_sqlite/SOURCE.txt)."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

from perfconsole.core.measure import bench
from perfconsole.core.measure.environment import collect
from perfconsole.core.settings import RunSpec
from perfconsole.model import annotate


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.shares_gpu])])
def test_a_compiled_run_is_not_recompiled_when_its_profiled_steps_begin(tmp_path, monkeypatch, device):
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(tmp_path / "data"))
    size, precision = ("tiny", "fp32") if device == "cpu" else ("small", "bf16")
    spec = RunSpec(size=size, ctx=16 if device == "cpu" else 256, batch=2, precision=precision, mode="train",
                   warmup=2, steps=3, device=device, compile=True, profile="torch").validate()
    events = []
    torch._dynamo.reset()
    monkeypatch.setattr(torch._dynamo.config, "error_on_recompile", True)
    try:
        bench.run(spec, events.append, collect(device), tmp_path)
    finally:
        annotate.set_range_factory(None, False)
        torch._dynamo.reset()
    failed = [e for e in events if type(e).__name__ in ("RunFailed", "Error")]
    assert not failed, failed
    overhead = next(e for e in events if type(e).__name__ == "ProfileOverhead")
    assert len(overhead.profiled_step_ms) == 3
    ready = next(e for e in events if type(e).__name__ == "ProfileReady")
    assert ready.tables, "the profile's tables were built"


def test_the_model_s_ranges_stay_the_shared_no_op_while_off_whatever_the_factory():
    opened = []
    try:
        annotate.set_range_factory(lambda name: opened.append(name) or annotate.NULL, model_ranges=False)
        assert annotate.annotate("layer_0") is annotate.NULL and opened == []
        annotate.phase("forward")
        assert opened == ["forward"]  # the phases still open through the factory
    finally:
        annotate.set_range_factory(None, False)

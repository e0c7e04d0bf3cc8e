"""Every optimization is its setting's converter, applied once, in one loop (core.measure.converters).

The ladders' rungs say which converters each spec turns on, in the order they apply; the timed loop applies
exactly those, through the loop, and nothing applies one a second time (the Stepper takes the converted model)."""
from __future__ import annotations

import sys
from dataclasses import fields

import pytest
import torch

from perfconsole.core import events as ev
from perfconsole.core.grids.ladder import DP_RUNG_NAMES, RUNG_NAMES, LadderSpec
from perfconsole.core.measure import bench, converters
from perfconsole.core.measure.environment import collect
from perfconsole.core.settings import RunSpec

CPU = torch.device("cpu")
BASE = RunSpec(size="tiny", ctx=16, batch=2, precision="bf16", mode="train", warmup=1, steps=2, device="cuda")


def _applied(spec: RunSpec) -> list[str]:
    return [c.setting for c in converters.applying(spec)]


def _last_rung(base: RunSpec, names: tuple[str, ...]) -> RunSpec:
    return LadderSpec(base, names, profile=False).cells()[-1]


def test_every_converter_is_registered_under_a_setting_in_the_order_the_runs_apply_them():
    assert set(converters.REGISTRY) <= {f.name for f in fields(RunSpec)}
    assert list(converters.REGISTRY) == ["weights", "kernels", "fp8", "sdpa_kernel", "sdpa_causal", "checkpoint",
                                         "parallel", "compile", "optimize_ddp"]
    assert _applied(RunSpec()) == []
    # optimize_ddp's converter is compiled autograd alone: DDP reads the other modes as it is built
    job = RunSpec(nproc=2, parallel="ddp", compile=True, device="cpu")
    assert _applied(job.with_(optimize_ddp="no_optimization")) == ["parallel", "compile"]
    assert _applied(job.with_(optimize_ddp="python_reducer")) == ["parallel", "compile", "optimize_ddp"]


@pytest.mark.parametrize("model, want", [
    ("builtin", ["weights", "kernels", "fp8", "checkpoint", "compile"]),
    ("hf:llama", ["weights", "kernels", "fp8", "sdpa_causal", "checkpoint", "compile"]),
])
def test_the_one_process_ladders_last_rung_applies_every_converter_it_climbed(model, want):
    last = _last_rung(BASE.with_(model=model), RUNG_NAMES)
    assert (last.weights, last.kernels, last.fp8, last.checkpoint, last.compile) == ("bf16", "liger", True, "blocks",
                                                                                      True)
    assert _applied(last) == want


def test_the_data_parallel_ladders_rungs_apply_their_converters_in_order():
    base = BASE.with_(nproc=2, parallel="ddp")
    cells = dict(zip(DP_RUNG_NAMES, LadderSpec(base, DP_RUNG_NAMES, profile=False).cells()))
    assert _applied(_last_rung(base, DP_RUNG_NAMES)) == ["parallel"]       # FSDP, eager, fp32 master weights
    assert _applied(cells["ddp"]) == ["parallel"]
    assert _applied(cells["bf16-weights"]) == ["weights", "parallel"]
    assert _applied(cells["compile"]) == ["weights", "parallel", "compile"]  # compile wraps DDP, not DDP compile
    # compiled autograd's context goes in last, around the compiled DDP
    assert _applied(cells["compiled-autograd"]) == ["weights", "parallel", "compile", "optimize_ddp"]


def test_a_data_parallel_spec_is_converted_only_as_a_jobs_rank():
    spec = BASE.with_(device="cpu", nproc=2, parallel="ddp")
    with pytest.raises(ValueError, match="one rank of a job"):
        converters.convert(spec, converters.Subject(bench.build_model(spec, CPU)))


def test_the_timed_loop_applies_the_cpu_ladders_last_rung_through_the_one_loop_once_each(tmp_path):
    """bench.run on the CPU ladder's last rung: each converter's code runs once, in the registry's order, called
    from the loop, and the fast paths' own code runs only there."""
    spec = _last_rung(BASE.with_(device="cpu"), RUNG_NAMES).validate()
    want = _applied(spec)
    assert want == ["weights", "checkpoint", "compile"]   # CUDA graphs, liger and fp8 need cuda: not carried
    codes = {c.convert.__code__: c.setting for c in converters.REGISTRY.values()}
    swaps = {converters.bf16_weights.__code__, converters.liger.__code__, converters.float8.__code__}
    calls: list[tuple[str, str]] = []
    swapped_from: list[str] = []

    def seen(frame, event, arg):
        if event != "call":
            return
        if frame.f_code in codes:
            calls.append((codes[frame.f_code], frame.f_back.f_code.co_name))
        elif frame.f_code in swaps:
            swapped_from.append(frame.f_back.f_code.co_name)

    got: list[ev.Event] = []

    def emit(event: ev.Event) -> None:
        if isinstance(event, ev.ModelReady):  # the model and its step are built: torch.compile runs untraced
            sys.setprofile(None)
        got.append(event)

    sys.setprofile(seen)
    try:
        bench.run(spec, emit, collect("cpu"), tmp_path)
    finally:
        sys.setprofile(None)
    assert calls == [(name, "convert") for name in want]
    assert swapped_from == ["_bf16_weights"]
    said = [(e.stage, e.detail) for e in got if isinstance(e, ev.Progress) and e.stage in ("applying", "compiling")]
    assert said == [("applying", "checkpoint blocks"), ("compiling", "torch.compile (default): the first step compiles")]
    assert sum(isinstance(e, ev.Step) for e in got) == spec.warmup + spec.steps


def test_the_stepper_applies_no_optimization_of_its_own():
    spec = BASE.with_(device="cpu", weights="bf16")
    model = bench.build_model(spec, CPU)
    bench.Stepper(spec, model, CPU)
    assert {p.dtype for p in model.parameters()} == {torch.float32}   # bf16 weights are their converter's

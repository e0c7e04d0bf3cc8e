"""Phase ranges: every kernel in its phase, and a profiled run that says what profiling cost.

On CUDA autograd runs the backward on its own thread; the backward range must be opened and closed
there. The CPU tests check the mechanism and the record; the gpu tests check the thread and the
attribution on a real GPU (the committed H100/H200 evidence comes from scripts/gpu_truth.sh)."""
from __future__ import annotations

import threading

import pytest
import torch

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.measure import bench
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.profile import attribution
from perfconsole.core.settings import RunSpec
from perfconsole.model import annotate


class Recorder:
    """A range factory that notes which thread opened and closed each range, and when."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, int]] = []

    def __call__(self, name: str):
        rec = self

        class Range:
            def __enter__(self):
                rec.log.append(("open", name, threading.get_ident()))

            def __exit__(self, *exc):
                rec.log.append(("close", name, threading.get_ident()))

        return Range()


def _backward_with_range(device: str) -> tuple[Recorder, list[int]]:
    rec = Recorder()
    annotate.set_range_factory(rec, model_ranges=False)
    try:
        w = torch.ones(8, 8, device=device, requires_grad=True)
        seen: list[int] = []
        w.register_hook(lambda g: seen.append(threading.get_ident()))  # a gradient computed inside
        loss = (w * 2).sum()
        bench._range_on_autograd_thread(loss, "backward")
        loss.backward()
        if device == "cuda":
            torch.cuda.synchronize()
    finally:
        annotate.set_range_factory(None, False)
    return rec, seen


def test_the_backward_range_opens_before_and_closes_after_the_gradients_on_one_thread():
    rec, seen = _backward_with_range("cpu")
    assert [(kind, name) for kind, name, _ in rec.log] == [("open", "backward"), ("close", "backward")]
    assert rec.log[0][2] == rec.log[1][2] == seen[0]


def test_the_range_factory_keeps_the_model_ranges_off_for_compiled_models():
    rec = Recorder()
    annotate.set_range_factory(rec, model_ranges=False)
    try:
        assert not annotate.enabled()
        assert annotate.factory() is rec  # one factory, kept by the model's hook, with the model's ranges off
        with annotate.annotate("layer_0"):
            pass
        assert rec.log == []
        with bench.phase("forward"):
            pass
        assert [k for k, _, _ in rec.log] == ["open", "close"]
        annotate.set_range_factory(rec, model_ranges=True)
        assert annotate.enabled()
    finally:
        annotate.set_range_factory(None, False)
    assert not annotate.enabled() and bench.phase("x") is bench._NULL


def _profiled(spec: RunSpec) -> RunRecord:
    record = RunRecord(spec)
    for event in Launch(spec).events():
        record.apply(event)
    assert record.status == "ok", record.error
    return record


# What a CPU train step runs outside its phase ranges: zero_grad, and reading the loss out as a number.
OUTSIDE_THE_STEP = {"Optimizer.zero_grad#AdamW.zero_grad", "detach", "aten::detach", "aten::item",
                    "aten::_local_scalar_dense"}


def _outside_phases(tables: dict) -> dict[str, int]:
    """Each op's time (ns) in no phase range: its total less its time inside forward, backward and
    optimizer_step."""
    from perfconsole.core.profiling.attribution import PHASE_NAMES

    outside: dict[str, int] = {}
    for row in tables["cuda_gpu_kern_sum"]:
        outside[row["name"]] = outside.get(row["name"], 0) + int(row["total_time_ns"])
    for row in tables["nvtx_kern_sum"]:
        if row["range"] in PHASE_NAMES:
            outside[row["name"]] -= int(row["total_time_ns"])
    return outside


@pytest.mark.e2e
def test_a_profiled_run_keeps_quiet_steps_and_records_the_profiling_cost(tmp_path):
    spec = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=3, mode="train", profile="torch")
    record = _profiled(spec)
    assert len(record.steps) == 3  # the quiet steps; the profiled ones are not mixed in
    o = record.profile.overhead
    assert o["profiler"] == "torch" and o["quiet_steps"] == 3 and o["profiled_steps"] == 3
    assert len(o["profiled_step_ms"]) == 3 and o["ratio"] == pytest.approx(o["profiled_ms"] / o["quiet_ms"])
    assert o["kernels_per_step"] > 0
    a = attribution(record.profile, record.summary, len(record.steps))
    assert [p.phase for p in a.phases] == ["forward", "backward", "optimizer"]
    assert all(p.kernel_ms > 0 for p in a.phases)
    # The profiled steps keep their own timed phases (the NVTX forward check holds ranges against them);
    # the kernels are held against the quiet program's phases.
    assert o["profiled_phase_ms"].keys() == {"forward", "backward", "optimizer"}
    assert a.phases[0].timed_ms == record.summary.forward_ms.median
    # On the CPU the table holds ops by self time. Outside every phase are only zero_grad (before the timed
    # step, by design) and the reading of the loss after it; on CUDA neither launches a kernel (the gpu test
    # holds 2 %). Their share is not bounded here: one preemption of a loaded machine inside zero_grad's
    # host time gave it 6 % of a CPU run's op time.
    outside = _outside_phases(record.profile.tables)
    assert {name for name, ns in outside.items() if ns > 0} <= OUTSIDE_THE_STEP, outside
    assert sum(outside.values()) / 1e6 == pytest.approx(a.unattributed_ms, abs=1e-6)
    again = RunRecord.from_dict(record.to_dict())
    assert again.profile.overhead == o


@pytest.mark.gpu
def test_on_cuda_the_backward_range_lives_on_autograd_s_own_thread():
    rec, seen = _backward_with_range("cuda")
    (_, _, opened), (_, _, closed) = rec.log
    assert opened == closed == seen[0] != threading.get_ident()


@pytest.mark.gpu
@pytest.mark.parametrize("profiler", ["torch", "nsys"])
def test_on_cuda_every_phase_holds_its_kernels(profiler):
    from perfconsole.core.profiling.locate import find_nsys

    if profiler == "nsys" and find_nsys() is None:
        pytest.skip("no nsys on this machine")
    # Kernel time stands against a timed phase the GPU was kept busy through. An eager bf16 forward can
    # be paced by the host instead, wholly or in part (2.7B on an H200: 48.9 ms of kernels in a 55.0 ms forward
    # issued in 44.8 ms): the GPU drained its queue while the host issued, so the kernels only fit inside the
    # phase, and the time with none running is bounded by the issue time. The backward is held the same way
    # against its own issue on autograd's thread (one of three H200 suite runs: 90.4 ms of kernels in a
    # 101.4 ms backward).
    spec = RunSpec(size="2.7B", ctx=512, batch=4, device="cuda", precision="bf16", warmup=3, steps=5,
                   mode="train", profile=profiler)
    record = _profiled(spec)
    assert record.summary.host_forward_ms is not None and record.summary.host_backward_ms is not None
    a = attribution(record.profile, record.summary, len(record.steps))
    assert a.unattributed_share <= 0.02, a
    for p in a.phases:
        assert p.per_step_ms <= p.timed_ms * 1.02, p  # a phase's kernels fit inside it
        if p.host_ms is not None:
            # On one stream the GPU waits only while the host is still issuing: the time with no kernel
            # running is at most the host's issue time (5 % for medians of different steps).
            assert p.timed_ms - p.per_step_ms <= p.host_ms + 0.05 * p.timed_ms, p
        # A phase short of its kernels by more than 10 % must be one the record calls host-paced.
        assert abs(p.rel_diff) <= 0.10 or p.host_paced, p

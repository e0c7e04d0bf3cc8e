"""torch.profiler capture of a tiny CPU model run gives nsys-shaped tables and a Chrome trace."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from perfconsole.core.profiling.analyses import category_shares, phase_shares, softmax_vs_matmuls
from perfconsole.core.profiling.categories import categorize
from perfconsole.core.profiling import torch_profiler
from perfconsole.core.profiling.torch_profiler import TorchCapture, range_factory
from perfconsole.model.annotate import annotate, set_range_factory
from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM

STEPS = 2


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> TorchCapture:
    torch.manual_seed(0)
    cfg = config_for("tiny", 32)
    model = TransformerLM(cfg)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randint(0, cfg.vocab_size, (2, 32))
    set_range_factory(range_factory())
    try:
        with TorchCapture(tmp_path_factory.mktemp("torch"), "cpu") as cap:
            for _ in range(STEPS):
                with annotate("forward"):
                    loss = model(x).float().mean()
                with annotate("backward"):
                    loss.backward()
                with annotate("optimizer_step"):
                    opt.step()
                    opt.zero_grad()
    finally:
        set_range_factory(None)
    return cap


def test_tables_have_the_nsys_columns(capture: TorchCapture) -> None:
    tables = capture.tables()
    assert set(tables) == {"cuda_gpu_kern_sum", "nvtx_sum", "nvtx_kern_sum"}
    kern = tables["cuda_gpu_kern_sum"]
    assert list(kern[0]) == ["time_pct", "total_time_ns", "instances", "avg_ns", "med_ns", "min_ns", "max_ns",
                             "stddev_ns", "name"]
    assert all(isinstance(r["total_time_ns"], int) and r["total_time_ns"] > 0 for r in kern)
    assert "aten::mm" in {r["name"] for r in kern} or "aten::addmm" in {r["name"] for r in kern}
    assert not {"forward", "backward", "layer_0"} & {r["name"] for r in kern}  # ranges are not ops
    json.dumps(tables)


def test_ranges_like_nvtx(capture: TorchCapture) -> None:
    nvtx = {r["range"]: r for r in capture.tables()["nvtx_sum"]}
    assert {"forward", "backward", "optimizer_step", "layer_0", "layer_1", "computing softmax",
            "attention_sublayer", "lm_head"} <= set(nvtx)
    assert nvtx["forward"]["instances"] == STEPS
    assert nvtx["layer_0"]["instances"] == STEPS
    assert nvtx["forward"]["total_time_ns"] > nvtx["layer_0"]["total_time_ns"]
    assert all(r["domain"] == "" and r["style"] == "PushPop" for r in nvtx.values())


def test_ops_attributed_to_every_enclosing_range(capture: TorchCapture) -> None:
    tables = capture.tables()
    nk = tables["nvtx_kern_sum"]
    in_forward = sum(r["total_time_ns"] for r in nk if r["range"] == "forward")
    in_layers = sum(r["total_time_ns"] for r in nk if r["range"] in ("layer_0", "layer_1"))
    assert 0 < in_layers < in_forward
    phases = {p.phase: p for p in phase_shares(tables)}
    assert set(phases) == {"forward", "backward", "optimizer_step"}
    # Which category leads a tiny CPU forward is the machine's business (a loaded CI machine put elementwise
    # first): what the attribution owes is every forward op's time in its category, largest first.
    fwd = phases["forward"]
    assert fwd.total_ns == in_forward and sum(c.total_ns for c in fwd.categories) == in_forward
    assert [c.total_ns for c in fwd.categories] == sorted((c.total_ns for c in fwd.categories), reverse=True)
    by_category: dict[str, int] = {}
    for r in nk:
        if r["range"] == "forward":
            by_category[categorize(r["name"])] = by_category.get(categorize(r["name"]), 0) + r["total_time_ns"]
    assert {c.category: c.total_ns for c in fwd.categories} == by_category and by_category["matmul"] > 0
    assert {c.category for c in category_shares(tables)} >= {"matmul", "softmax", "elementwise"}
    s = softmax_vs_matmuls(tables)
    assert s is not None and s.instances == STEPS * 2 and s.kernel_softmax_ns and s.kernel_softmax_ns > 0


def test_chrome_trace_written(capture: TorchCapture) -> None:
    (trace,) = capture.files
    doc = json.loads(Path(trace).read_text())
    names = {e.get("name") for e in doc["traceEvents"]}
    assert "forward" in names and "computing softmax" in names


def test_tables_before_capture_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        TorchCapture(tmp_path, "cpu").tables()


class _Interval:
    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end


class _Kernel:
    def __init__(self, name: str, duration_us: float) -> None:
        self.name, self.duration = name, duration_us


class _Event:
    """The fields of torch.autograd.profiler_util.FunctionEvent that the table builder reads."""

    def __init__(self, name, device, start, end, kernels=(), parent=None, self_cpu=0.0):
        self.name, self.device_type = name, device
        self.time_range = _Interval(start, end)
        self.kernels, self.cpu_parent, self.self_cpu_time_total = list(kernels), parent, self_cpu


@pytest.fixture
def range_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The names a model's ranges are opened with: range_factory records them as a run opens them, and the two
    tests below build their events by hand. Without this they read the names the `capture` fixture's run left
    in the process, and failed on an xdist worker that had not run it."""
    monkeypatch.setattr(torch_profiler, "_RANGE_NAMES", {"forward", "backward", "optimizer_step"})


@pytest.mark.usefixtures("range_names")
def test_cuda_annotation_twins_do_not_double_the_ranges(tmp_path: Path) -> None:
    # On CUDA, Kineto reports a record_function both as a CPU range and as a gpu_user_annotation on
    # the device (seen on an H200: `forward` had 80 instances over 40 steps). No CUDA here, so the
    # event list is built in the shape torch gives; tests/tui/test_console_gpu.py checks the real one.
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    events = []
    for step in range(3):
        t = step * 100.0
        fwd = _Event("forward", cpu, t, t + 50)
        mm = _Event("aten::mm", cpu, t + 1, t + 40, kernels=[_Kernel("nvjet_sm90_tst_gemm", 30.0)], parent=fwd)
        events += [fwd, mm, _Event("forward", cuda, t + 2, t + 45)]
    cap = TorchCapture(tmp_path, "cuda")
    tables = cap._build(events)
    nvtx = {r["range"]: r for r in tables["nvtx_sum"]}
    assert nvtx["forward"]["instances"] == 3 and nvtx["forward"]["total_time_ns"] == 150_000
    kern = {(r["range"], r["name"]): r for r in tables["nvtx_kern_sum"]}
    assert kern[("forward", "nvjet_sm90_tst_gemm")]["nvtx_inst"] == 3
    assert tables["cuda_gpu_kern_sum"][0]["instances"] == 3


@pytest.mark.usefixtures("range_names")
def test_a_kernel_counts_once_when_several_ops_carry_its_correlation_id(tmp_path: Path) -> None:
    """On CUDA, torch links a kernel to every op with its correlation id; with torch.compile in the
    process two ops can share one (a compiled 2.7B step's fused AdamW kernels counted 6 times over on an
    H200). The events are torch's own FunctionEvent objects, as a CUDA capture yields them."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    def ev(id_, name, start, end, device=DeviceType.CPU, linked=0):
        return FunctionEvent(id=id_, name=name, thread=1, start_us=start, end_us=end, device_type=device,
                             linked_correlation_id=linked)

    rng = ev(1, "optimizer_step", 0, 300)
    step = ev(7, "Optimizer.step#AdamW.step", 5, 250)
    fused = ev(7, "aten::_fused_adamw_", 10, 200)
    other = ev(7, "aten::unrelated", 400, 500)      # the same id, closed before the launch
    step.set_cpu_parent(rng)
    fused.set_cpu_parent(step)
    launch = ev(99, "cudaLaunchKernel", 50, 51, linked=7)
    kernel = ev(100, "multi_tensor_apply_kernel", 60, 80, device=DeviceType.CUDA, linked=7)
    twin = FunctionEvent(id=101, name="optimizer_step", thread=1, start_us=0, end_us=300,
                         device_type=DeviceType.CUDA, is_user_annotation=True, linked_correlation_id=1)
    tables = TorchCapture(tmp_path, "cuda")._build([rng, step, fused, other, launch, kernel, twin])
    assert [(r["name"], r["instances"], r["total_time_ns"]) for r in tables["cuda_gpu_kern_sum"]] == [
        ("multi_tensor_apply_kernel", 1, 20_000)]
    inside = {(r["range"], r["name"]): r["total_time_ns"] for r in tables["nvtx_kern_sum"]}
    assert inside == {("optimizer_step", "multi_tensor_apply_kernel"): 20_000}

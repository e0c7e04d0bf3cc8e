"""`--sdpa-kernel`: the one kernel left on for scaled_dot_product_attention, the rules that refuse a spec before
any process starts, and a CPU run that says which it ran; `--sdpa-causal`: a compiled hf: model's SDPA calls
without their dense mask. The kernels themselves differ only on a GPU: the figures are in
docs/results/llama1B_why_h200.md, and the last test here runs FlashAttention on the GPU machine."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from perfconsole.core.measure import attention_kernels
from perfconsole.core.settings import RunSpec, SpecError


@pytest.fixture
def switches():
    before = attention_kernels.enabled()
    yield
    for name, on in before.items():
        attention_kernels.SWITCHES[name](on)


@pytest.mark.parametrize("kernel", ["flash", "cudnn", "efficient", "math"])
def test_a_chosen_kernel_is_the_only_one_on(switches, kernel):
    assert attention_kernels.apply(kernel, torch.nn.Identity()) == kernel
    assert attention_kernels.enabled() == {k: k == kernel for k in attention_kernels.SWITCHES}


def test_auto_changes_nothing(switches):
    attention_kernels.apply("math", torch.nn.Identity())
    attention_kernels.apply("auto", torch.nn.Identity())
    assert attention_kernels.enabled() == {k: k == "math" for k in attention_kernels.SWITCHES}


def test_math_alone_computes_what_the_default_does(switches):
    q, k, v = (torch.randn(2, 4, 16, 8, generator=torch.Generator().manual_seed(i)) for i in range(3))
    default = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    attention_kernels.apply("math", torch.nn.Identity())
    torch.testing.assert_close(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), default)


@pytest.mark.parametrize("changes, reason", [
    ({"attention": "naive", "sdpa_kernel": "math"}, "sdpa kernel math picks scaled_dot_product_attention's kernel; "
                                                    "it needs attention sdpa"),
    ({"attention": "sdpa", "sdpa_kernel": "flash", "device": "cpu"}, "sdpa kernel flash needs device cuda"),
    ({"attention": "sdpa", "sdpa_kernel": "cudnn", "device": "cuda", "precision": "fp32"},
     "sdpa kernel cudnn runs bf16 or fp16 only; choose precision bf16"),
])
def test_what_a_kernel_cannot_run_is_refused_before_any_process(changes, reason):
    with pytest.raises(SpecError, match=reason):
        RunSpec(size="tiny", **changes).validate()
    RunSpec(size="tiny", attention="sdpa", sdpa_kernel="flash", device="cuda", precision="bf16").validate()


def test_a_cpu_run_with_the_math_kernel_says_so_and_matches_the_default():
    def run(*flags: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "perfconsole.core.cli.main", "run", "--size", "tiny", "--device",
                              "cpu", "--ctx", "16", "--batch", "2", "--mode", "train", "--attention", "sdpa",
                              "--warmup", "1", "--steps", "2", "--json", *flags], capture_output=True, text=True,
                             timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["data"]

    plain, math = run(), run("--sdpa-kernel", "math")
    assert math["spec"]["sdpa_kernel"] == "math" and math["name"].endswith("sdpa sdpa-math")
    assert [s["loss"] for s in math["steps"]] == pytest.approx([s["loss"] for s in plain["steps"]], rel=1e-5)


@pytest.fixture
def exporting():
    masking = pytest.importorskip("transformers.masking_utils")
    before = masking.is_torchdynamo_exporting, masking.find_packed_sequence_indices
    yield masking
    masking.is_torchdynamo_exporting, masking.find_packed_sequence_indices = before


def _skips_the_mask(masking) -> bool:
    """transformers' own decision, made inside torch.compile: may SDPA take is_causal instead of a mask?"""
    decided = torch.compile(lambda x: x + 1 if masking._ignore_causal_mask_sdpa(None, 16, 16, 0, 0) else x - 1,
                            backend="eager", fullgraph=True)
    return bool(decided(torch.zeros(1)).item() == 1)


def test_sdpa_causal_lets_a_compiled_hf_model_skip_its_dense_mask(exporting):
    """torch 2.11's dynamo answered `is_exporting()` True while compiling, and transformers then built the mask (on
    the GPU machine); torch 2.13's here answers False. Either way, with the setting transformers' own decision,
    made inside torch.compile, is to skip the mask, through the name its mask builders read."""
    assert "is_torchdynamo_exporting" in exporting._ignore_causal_mask_sdpa.__code__.co_names
    assert attention_kernels.causal(True, torch.nn.Identity()) is True
    assert exporting.is_torchdynamo_exporting is attention_kernels._never_exporting
    assert _skips_the_mask(exporting)


def test_a_compiled_hf_model_attends_without_a_mask_and_computes_the_same_logits(exporting):
    """The graph torch.compile captures of hf:llama: without the setting its SDPA calls take a dense boolean mask
    (transformers cannot read, while tracing, that the positions hold one sequence a row); with it, is_causal and
    no mask, and the same logits."""
    from perfconsole.core.measure import model_build

    spec = RunSpec(model="hf:llama", size="tiny", ctx=16, batch=2, attention="sdpa", device="cpu")
    torch.manual_seed(0)
    built = model_build.build(spec, torch.device("cpu"))
    inputs, _ = model_build.make_batch(built, spec, "cpu")

    def compiled() -> tuple[torch.Tensor, list[tuple[bool, object]]]:
        calls: list[tuple[bool, object]] = []

        def backend(gm, example_inputs):
            for node in gm.graph.nodes:
                if node.target is torch._C._nn.scaled_dot_product_attention:
                    mask = node.kwargs.get("attn_mask", node.args[3] if len(node.args) > 3 else None)
                    calls.append((mask is not None, node.kwargs.get("is_causal")))
            return gm.forward

        torch._dynamo.reset()
        with torch.no_grad():
            logits = model_build.logits_of(model_build.call(torch.compile(built.module, backend=backend), inputs))
        return logits, calls

    masked, calls = compiled()
    assert calls and all(has_mask for has_mask, _ in calls), calls
    attention_kernels.causal(True, built.module)
    logits, calls = compiled()
    assert calls and all(not has_mask and causal for has_mask, causal in calls), calls
    torch.testing.assert_close(logits, masked, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.shares_gpu  # nothing timed: which kernels may run
def test_on_cuda_flash_runs_a_compiled_hf_model_only_with_sdpa_causal(switches, exporting):
    """FlashAttention takes no mask: a compiled hf:llama's dense mask left it no kernel (Llama-1B on an H200:
    `Invalid backend`); with --sdpa-causal the same model trains a step on it."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from perfconsole.core.measure import model_build

    spec = RunSpec(model="hf:llama", size="tiny", ctx=128, batch=2, attention="sdpa", device="cuda",
                   precision="bf16")
    cuda = torch.device("cuda")
    torch.manual_seed(0)
    built = model_build.build(spec, cuda)
    inputs, _ = model_build.make_batch(built, spec, cuda)
    attention_kernels.apply("flash", built.module)

    def step() -> None:
        torch._dynamo.reset()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model_build.logits_of(model_build.call(torch.compile(built.module, backend="aot_eager"), inputs))
        logits.float().sum().backward()
        torch.cuda.synchronize()

    with pytest.raises(Exception, match="Invalid backend|No available kernel"):
        step()
    attention_kernels.causal(True, built.module)
    step()


def test_sdpa_causal_on_a_transformers_without_those_mask_builders_changes_nothing_and_says_so(exporting, monkeypatch):
    from perfconsole.core.measure import Unsupported

    monkeypatch.delattr(exporting, "find_packed_sequence_indices")
    before = exporting.is_torchdynamo_exporting
    with pytest.raises(Unsupported, match=r"sdpa causal: transformers \S+ has no masking_utils\."
                                          r"find_packed_sequence_indices"):
        attention_kernels.causal(True, torch.nn.Identity())
    assert exporting.is_torchdynamo_exporting is before

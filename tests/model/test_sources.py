"""Model sources: the builtin, hf: architectures from config classes, and a user's factory, with their
one-line errors; FLOPs counted on a twin agree with the builtin formula."""
from __future__ import annotations

import importlib.util
import textwrap

import pytest
import torch

from perfconsole.core.flops import forward_flops
from perfconsole.core.measure import converters, model_build
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.model.sources import ModelError, parse
from perfconsole.model.sources.hf import INSTALL

CPU = torch.device("cpu")
# transformers is imported by the tests that build its models, not as every xdist worker collects (0.7 CPU-s each)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")


def build(**kw):
    spec = RunSpec(device="cpu", **{"size": "tiny", "ctx": 16, "batch": 2, **kw}).validate()
    return spec, model_build.build(spec, CPU)


def test_parse_names_each_source_and_refuses_the_rest():
    assert parse("builtin") == ("builtin", "")
    assert parse("hf:Llama") == ("hf", "llama")
    assert parse("my/model.py:build") == ("factory", "my/model.py:build")
    assert parse("pkg.mod:make") == ("factory", "pkg.mod:make")
    for bad in ("", "hf:", "model.py", "x.py:1abc", "not a module:f"):
        with pytest.raises(ModelError):
            parse(bad)


def test_builtin_source_is_the_old_model_and_the_counted_flops_match_the_formula():
    # tiny: the formula holds exactly at every size (0.0 apart at small and tiny alike), and small's 124M parameters
    # took about 6 CPU-s to initialise on the CPU
    spec, built = build(size="tiny", ctx=64, mode="train")
    assert built.info.source == "builtin" and built.info.architecture == "TransformerLM"
    assert built.info.params == sum(p.numel() for p in built.module.parameters())
    got = model_build.counted_flops(spec, built, loss_fn=converters.torch_loss)
    d_model, d_ff, n_layers, _ = spec.dims()
    formula = forward_flops(d_model, d_ff, n_layers, spec.vocab, spec.batch, spec.ctx)
    assert got["flops_source"] == "counted" and got["counted_on"] == "meta"
    assert abs(got["forward_flops"] / formula - 1) < 0.02
    assert abs(got["backward_flops"] / (2 * formula) - 1) < 0.02
    assert model_build.counted_flops(spec, built)["cached"] is True   # the second ask reads the cache


def test_hf_llama_has_grouped_query_heads_and_its_sdpa_flops_are_counted_on_an_eager_twin():
    spec, built = build(model="hf:llama", attention="sdpa", mode="train")
    assert built.info.architecture == "LlamaForCausalLM" and built.info.attention == "sdpa"
    assert built.info.config["num_key_value_heads"] == 2 and built.info.config["num_attention_heads"] == 4
    got = model_build.counted_flops(spec, built, loss_fn=converters.torch_loss)
    assert got["flops_source"] == "counted" and got["counted_on"] in ("meta", "fake")
    assert got["attention_flops"].startswith("full")
    inputs, targets = model_build.make_batch(built, spec, CPU)
    logits = model_build.logits_of(model_build.call(built.module, inputs))
    model_build.check_logits(logits, spec, built.info.vocab_size, built.info.name)


def test_an_eager_twin_leaves_the_measured_model_on_sdpa():
    """The twin is built from the same shape; had it shared the config object, transformers would have
    written "eager" into it and the measured model would run eager attention (2.08x slower steps on an H200)."""
    spec, built = build(model="hf:llama", attention="sdpa", mode="train")
    built.twin(torch.device("meta"))
    inputs, _ = model_build.make_batch(built, spec, CPU)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        model_build.call(built.module, inputs)
    ops = {e.key for e in prof.key_averages()}
    assert "aten::scaled_dot_product_attention" in ops, sorted(o for o in ops if "softmax" in o or "attention" in o)
    assert built.module.config._attn_implementation == "sdpa"


def test_llama_1B_is_the_published_shape():
    spec = RunSpec(model="hf:llama", size="1B", device="cpu").validate()
    import transformers

    from perfconsole.model.sources.hf import make_config

    cfg = make_config(model_build.request(spec))
    with torch.device("meta"):
        m = transformers.AutoModelForCausalLM.from_config(cfg)
    assert cfg.vocab_size == 128_256 and cfg.num_key_value_heads == 8
    assert sum(p.numel() for p in m.parameters()) == 1_235_814_400   # Llama 3.2 1B, tied embeddings


def test_hf_bad_input_is_one_line():
    with pytest.raises(SpecError, match="size: hf:llama has tiny, 1B, 3B, 8B, default, custom, not '124M'"):
        RunSpec(model="hf:llama", size="124M").validate()
    with pytest.raises(ModelError, match="has no architecture 'nosucharch'"):
        build(model="hf:nosucharch", size="default")
    with pytest.raises(ModelError, match="LlamaConfig has no field 'wings'"):
        build(model="hf:llama", model_args=("wings=2",))
    assert "perfconsole[hf]" in INSTALL


def _user_file(tmp_path, body: str):
    path = tmp_path / "mine.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_factory_errors_name_the_users_file_and_line(tmp_path):
    path = _user_file(tmp_path, """\
        import torch

        def build(ctx, vocab_size, width=8):
            if width > 10:
                raise ValueError("width too large")
            return torch.nn.Linear(width, vocab_size)

        def not_a_model(ctx, vocab_size):
            return 3
        """)
    with pytest.raises(SpecError, match="no file"):
        RunSpec(model=f"{tmp_path}/absent.py:build", device="cpu").validate()
    with pytest.raises(ModelError, match=r"has no function 'make' \(it defines build, not_a_model\)"):
        build(model=f"{path}:make")
    with pytest.raises(ModelError, match=r"raised ValueError: width too large \(mine.py:5 in build\)"):
        build(model=f"{path}:build", model_args=("width=12",))
    with pytest.raises(ModelError, match="model_args: mine.py:build rejected its arguments: .*'depth'"):
        build(model=f"{path}:build", model_args=("depth=2",))
    with pytest.raises(ModelError, match="returned a int, not a torch.nn.Module"):
        build(model=f"{path}:not_a_model")
    with pytest.raises(ModelError, match="no module named 'no_such_pkg'"):
        build(model="no_such_pkg.models:build")


def test_factory_logits_of_the_wrong_shape_or_dtype_are_refused(tmp_path):
    path = _user_file(tmp_path, """\
        import torch

        class Ids(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(1))
            def forward(self, ids):
                return ids

        def build(ctx, vocab_size):
            return Ids()
        """)
    spec, built = build(model=f"{path}:build")
    logits = built.module(model_build.make_batch(built, spec, CPU)[0])
    with pytest.raises(ModelError, match=r"logits of shape \(2, 16\), not \(batch, ctx, vocab\) = \(2, 16, 10000\)"):
        model_build.check_logits(logits, spec, built.info.vocab_size, built.info.name)
    with pytest.raises(ModelError, match="dtype torch.int64"):
        model_build.check_logits(logits[..., None].expand(2, 16, 10000), spec, 10000, built.info.name)


def test_layer_ranges_hook_the_largest_module_list():
    _spec, built = build(model="hf:llama")
    blocks = model_build.repeated_blocks(built.module)
    assert [p for p, _ in blocks] == ["model.layers.0", "model.layers.1"]
    opened = []

    import contextlib

    from perfconsole.model import annotate

    def factory(name):
        opened.append(name)
        return contextlib.nullcontext()

    model_build.install_layer_ranges(built.module)
    annotate.set_range_factory(factory)
    try:
        built.module(torch.zeros(1, 4, dtype=torch.long))
    finally:
        annotate.set_range_factory(None)
    assert opened[:2] == ["model.layers.0", "model.layers.0.input_layernorm"]
    assert "model.layers.1.mlp" in opened


def test_what_a_factory_model_raises_in_its_first_step_names_the_users_frame(tmp_path):
    path = _user_file(tmp_path, """\
        import torch

        class Broken(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(1))
            def forward(self, ids):
                return ids.view(3, -1, 7)

        def build(ctx, vocab_size):
            return Broken()
        """)
    spec, built = build(model=f"{path}:build")
    inputs, _ = model_build.make_batch(built, spec, CPU)
    with pytest.raises(ModelError, match=r"mine.py:build's first step raised RuntimeError: .* \(mine.py:8 in forward\)"):
        with model_build.first_step(built):
            built.module(inputs)
    with pytest.raises(torch.OutOfMemoryError):              # an out-of-memory stays one
        with model_build.first_step(built):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    _spec, builtin = build()
    with pytest.raises(IndexError):                          # perfconsole's own model: not the user's code
        with model_build.first_step(builtin):
            raise IndexError("out of range")

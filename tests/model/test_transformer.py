import math

import torch

from perfconsole.model import annotate
from perfconsole.model.config import SIZES, ModelConfig, config_for
from perfconsole.model.transformer import RMSNorm, RotaryEmbedding, TransformerLM, naive_attention


def test_sizes_match_the_assignment():
    assert SIZES["small"] == (768, 3072, 12, 12)
    assert SIZES["medium"] == (1024, 4096, 24, 16)
    assert SIZES["large"] == (1280, 5120, 36, 20)
    assert SIZES["xl"] == (1600, 6400, 48, 25)
    assert SIZES["2.7B"] == (2560, 10240, 32, 32)


def test_param_count_matches_the_module():
    cfg = config_for("tiny", 32)
    model = TransformerLM(cfg)
    assert sum(p.numel() for p in model.parameters()) == cfg.param_count()
    assert not any("bias" in n for n, _ in model.named_parameters())


def test_forward_shape_and_causality():
    torch.manual_seed(0)
    cfg = config_for("tiny", 16)
    model = TransformerLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    out = model(ids)
    assert out.shape == (2, 16, cfg.vocab_size)
    ids2 = ids.clone()
    ids2[:, 10:] = (ids2[:, 10:] + 1) % cfg.vocab_size  # change only the future
    out2 = model(ids2)
    torch.testing.assert_close(out[:, :10], out2[:, :10])
    assert not torch.allclose(out[:, 10:], out2[:, 10:])


def test_sdpa_matches_naive_attention():
    torch.manual_seed(0)
    cfg = config_for("tiny", 16)
    naive, sdpa = TransformerLM(cfg, "naive"), TransformerLM(cfg, "sdpa")
    sdpa.load_state_dict(naive.state_dict())
    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    torch.testing.assert_close(naive(ids), sdpa(ids), rtol=1e-4, atol=1e-4)


def test_rmsnorm_computes_in_fp32_and_casts_back():
    norm = RMSNorm(8)
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    y = norm(x)
    assert y.dtype == torch.bfloat16
    ref = x.float() / torch.sqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(y.float(), ref, rtol=1e-2, atol=1e-2)


def test_rope_rotates_pairs_and_keeps_norm():
    rope = RotaryEmbedding(4, 8, theta=10000.0)
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]] * 8)
    y = rope(x, torch.arange(8))
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    # position 1, first pair rotates by 1 rad; second pair by 1/sqrt(10000)... theta^(-2/4) = 0.01
    torch.testing.assert_close(y[1, :2], torch.tensor([math.cos(1.0), math.sin(1.0)]))
    torch.testing.assert_close(y[1, 2:], torch.tensor([math.cos(0.01), math.sin(0.01)]))


def test_naive_attention_is_causal_softmax():
    q = k = v = torch.randn(1, 1, 4, 8)
    out = naive_attention(q, k, v)
    torch.testing.assert_close(out[..., 0, :], v[..., 0, :])  # first token only sees itself


def test_annotation_ranges_open_only_when_enabled():
    seen: list[str] = []

    class Rec:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            seen.append(self.name)

        def __exit__(self, *exc):
            return False

    cfg = config_for("tiny", 8)
    model = TransformerLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (1, 8))
    model(ids)
    assert seen == [] and not annotate.enabled()
    annotate.set_range_factory(Rec)
    try:
        model(ids)
    finally:
        annotate.set_range_factory(None)
    for name in ("layer_0", "layer_1", "attention_sublayer", "ffn_sublayer", "attention projections", "rope",
                 "computing attention scores", "computing softmax", "final matmul", "output projection",
                 "final_norm", "lm_head"):
        assert name in seen


def test_custom_config_head_dim():
    assert ModelConfig(96, 384, 1, 4).d_head == 24

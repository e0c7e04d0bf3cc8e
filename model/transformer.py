"""CS336-style Transformer LM: pre-norm blocks, RMSNorm, RoPE, causal MHA, SwiGLU, untied lm_head."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from perfconsole.model.annotate import annotate
from perfconsole.model.config import ModelConfig

ATTENTION_IMPLS = ("naive", "sdpa")


def _trunc_normal(shape: tuple[int, ...], std: float) -> nn.Parameter:
    w = torch.empty(shape)
    nn.init.trunc_normal_(w, mean=0.0, std=std, a=-3 * std, b=3 * std)
    return nn.Parameter(w)


class Linear(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.weight = _trunc_normal((d_out, d_in), math.sqrt(2.0 / (d_in + d_out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class Embedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.weight = _trunc_normal((vocab_size, d_model), 1.0)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.weight[ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x32 = x.float()
        rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * rms * self.weight.float()).to(dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, d_head: int, max_len: int, theta: float = 10_000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # x: (..., seq, d_head); rotate interleaved pairs (x0, x1), (x2, x3), ...
        cos = self.cos[positions].to(x.dtype)
        sin = self.sin[positions].to(x.dtype)
        x_even, x_odd = x[..., 0::2], x[..., 1::2]
        rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
        return rotated.flatten(-2)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention written out: scores, mask, softmax, matmul (what the course profiles)."""
    seq = q.shape[-2]
    with annotate("computing attention scores"):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    with annotate("computing softmax"):
        probs = torch.softmax(scores, dim=-1)
    with annotate("final matmul"):
        return probs @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, impl: str = "naive") -> None:
        super().__init__()
        if impl not in ATTENTION_IMPLS:
            raise ValueError(f"attention must be one of {', '.join(ATTENTION_IMPLS)}, not {impl!r}")
        self.n_heads = cfg.n_heads
        self.impl = impl
        self.q_proj = Linear(cfg.d_model, cfg.d_model)
        self.k_proj = Linear(cfg.d_model, cfg.d_model)
        self.v_proj = Linear(cfg.d_model, cfg.d_model)
        self.output_proj = Linear(cfg.d_model, cfg.d_model)
        self.rope = RotaryEmbedding(cfg.d_head, cfg.context_length, cfg.rope_theta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        with annotate("attention projections"):
            q, k, v = (p(x).view(b, s, self.n_heads, -1).transpose(1, 2)
                       for p in (self.q_proj, self.k_proj, self.v_proj))
        with annotate("rope"):
            positions = torch.arange(s, device=x.device)
            q, k = self.rope(q, positions), self.rope(k, positions)
        if self.impl == "sdpa":
            with annotate("sdpa"):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = naive_attention(q, k, v)
        with annotate("output projection"):
            return self.output_proj(out.transpose(1, 2).reshape(b, s, d))


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w1 = Linear(d_model, d_ff)
        self.w2 = Linear(d_ff, d_model)
        self.w3 = Linear(d_model, d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig, attention: str = "naive") -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg, attention)
        self.norm2 = RMSNorm(cfg.d_model)
        self.ffn = SwiGLU(cfg.d_model, cfg.d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with annotate("attention_sublayer"):
            x = x + self.attn(self.norm1(x))
        with annotate("ffn_sublayer"):
            return x + self.ffn(self.norm2(x))


class TransformerLM(nn.Module):
    def __init__(self, cfg: ModelConfig, attention: str = "naive") -> None:
        super().__init__()
        self.cfg = cfg
        self.token_embeddings = Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(TransformerBlock(cfg, attention) for _ in range(cfg.n_layers))
        self.ln_final = RMSNorm(cfg.d_model)
        self.lm_head = Linear(cfg.d_model, cfg.vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.token_embeddings(ids)
        for i, layer in enumerate(self.layers):
            with annotate(f"layer_{i}"):
                x = layer(x)
        with annotate("final_norm"):
            x = self.ln_final(x)
        with annotate("lm_head"):
            return self.lm_head(x)

"""A typical student Transformer LM, and the factory that hands it to perfconsole.

    perfconsole run --model docs/examples/student_model.py:build --model-arg d_model=256 --model-arg n_layers=4

perfconsole calls `build(ctx=..., vocab_size=..., **model_args)` (each --model-arg KEY=VALUE arrives as a
keyword, numbers already converted) and measures the module it returns: token ids of shape (batch, ctx)
in, logits of shape (batch, ctx, vocab_size) out. The class below knows nothing of perfconsole.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model, bias=False)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class StudentGPT(nn.Module):
    def __init__(self, vocab_size: int, ctx: int, d_model: int, n_layers: int, n_heads: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(ctx, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, 4 * d_model) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def build(ctx: int, vocab_size: int, d_model: int = 128, n_layers: int = 2, n_heads: int = 4) -> nn.Module:
    """The factory perfconsole calls: the spec's context length and vocabulary, then the --model-arg pairs."""
    return StudentGPT(vocab_size, ctx, d_model, n_layers, n_heads)

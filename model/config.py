"""Model dimensions: the named sizes of the CS336 assignment, plus `tiny` for CPU tests."""
from __future__ import annotations

from dataclasses import dataclass


BUILTIN_VOCAB = 10_000  # the builtin model's vocabulary when the spec names none


@dataclass(frozen=True)
class ModelConfig:
    d_model: int
    d_ff: int
    n_layers: int
    n_heads: int
    vocab_size: int = BUILTIN_VOCAB
    context_length: int = 256
    rope_theta: float = 10_000.0

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def param_count(self) -> int:
        """Trainable parameters (embedding and lm_head are untied, so both count)."""
        per_layer = 4 * self.d_model * self.d_model + 3 * self.d_model * self.d_ff + 2 * self.d_model
        return 2 * self.vocab_size * self.d_model + self.n_layers * per_layer + self.d_model


# (d_model, d_ff, n_layers, n_heads)
SIZES: dict[str, tuple[int, int, int, int]] = {
    "tiny": (64, 256, 2, 4),
    "small": (768, 3072, 12, 12),
    "medium": (1024, 4096, 24, 16),
    "large": (1280, 5120, 36, 20),
    "xl": (1600, 6400, 48, 25),
    "2.7B": (2560, 10240, 32, 32),
}


def config_for(size: str, context_length: int, vocab_size: int = 10_000) -> ModelConfig:
    d_model, d_ff, n_layers, n_heads = SIZES[size]
    return ModelConfig(d_model, d_ff, n_layers, n_heads, vocab_size, context_length)

"""Published shapes of Hugging Face architectures, as config keyword arguments: pure data, so a spec's
size can be checked without importing `transformers`.

Sources are the models' published config.json files: Llama 3.2 1B/3B and Llama 3.1 8B (grouped-query
heads, 128,256-token vocabulary, rope_theta 500,000; their llama3 RoPE frequency scaling is left out, as
it changes no shape and no FLOP), GPT-2 124M/355M/774M/1.5B, Qwen2.5 0.5B/1.5B/3B/7B and Qwen3
0.6B/1.7B/4B/8B. `tiny` is for CPU tests. Any other architecture that transformers has runs at its
config class's defaults (`default`) or with custom dimensions (`custom`).
"""
from __future__ import annotations

from typing import Any

_LLAMA = dict(vocab_size=128_256, rope_theta=500_000.0, rms_norm_eps=1e-5, max_position_embeddings=131_072)
_QWEN2 = dict(vocab_size=151_936, rope_theta=1_000_000.0, rms_norm_eps=1e-6, max_position_embeddings=32_768)
_QWEN3 = dict(vocab_size=151_936, rope_theta=1_000_000.0, rms_norm_eps=1e-6, max_position_embeddings=40_960,
              head_dim=128)


def _l(hidden: int, inter: int, layers: int, heads: int, kv: int, tied: bool, base: dict[str, Any],
       **extra: Any) -> dict[str, Any]:
    return {**base, "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "tie_word_embeddings": tied, **extra}


def _gpt2(n_embd: int, n_layer: int, n_head: int) -> dict[str, Any]:
    return {"n_embd": n_embd, "n_layer": n_layer, "n_head": n_head, "vocab_size": 50_257, "n_positions": 1024}


SHAPES: dict[str, dict[str, dict[str, Any]]] = {
    "llama": {
        "tiny": _l(64, 256, 2, 4, 2, False, _LLAMA, vocab_size=1000),
        "1B": _l(2048, 8192, 16, 32, 8, True, _LLAMA),
        "3B": _l(3072, 8192, 28, 24, 8, True, _LLAMA),
        "8B": _l(4096, 14_336, 32, 32, 8, False, _LLAMA),
    },
    "qwen2": {
        "tiny": _l(64, 256, 2, 4, 2, True, _QWEN2, vocab_size=1000),
        "0.5B": _l(896, 4864, 24, 14, 2, True, _QWEN2),
        "1.5B": _l(1536, 8960, 28, 12, 2, True, _QWEN2),
        "3B": _l(2048, 11_008, 36, 16, 2, True, _QWEN2),
        "7B": _l(3584, 18_944, 28, 28, 4, False, _QWEN2, vocab_size=152_064),
    },
    "qwen3": {
        "tiny": _l(64, 256, 2, 4, 2, True, _QWEN3, vocab_size=1000, head_dim=16),
        "0.6B": _l(1024, 3072, 28, 16, 8, True, _QWEN3),
        "1.7B": _l(2048, 6144, 28, 16, 8, True, _QWEN3),
        "4B": _l(2560, 9728, 36, 32, 8, True, _QWEN3),
        "8B": _l(4096, 12_288, 36, 32, 8, False, _QWEN3),
    },
    "gpt2": {
        "tiny": {**_gpt2(64, 2, 4), "vocab_size": 1000, "bos_token_id": 0, "eos_token_id": 0},
        "124M": _gpt2(768, 12, 12),
        "355M": _gpt2(1024, 24, 16),
        "774M": _gpt2(1280, 36, 20),
        "1.5B": _gpt2(1600, 48, 25),
    },
}
# Every architecture also takes these: its config class's own defaults, and --d-model/--d-ff/--n-layers/--n-heads.
GENERIC_SIZES = ("default", "custom")

# --d-model/--d-ff/--n-layers/--n-heads as config fields: the common names, and GPT-2's own.
DIM_FIELDS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
GPT2_DIM_FIELDS = ("n_embd", "n_inner", "n_layer", "n_head")


def sizes(arch: str) -> tuple[str, ...]:
    """The sizes `--size` may name for this architecture."""
    return (*SHAPES.get(arch, {}), *GENERIC_SIZES)


def dims(arch: str, size: str) -> tuple[int, int, int, int] | None:
    """(d_model, d_ff, n_layers, n_heads) of a published shape, for reports; None where not tabled."""
    shape = SHAPES.get(arch, {}).get(size)
    if shape is None:
        return None
    if arch == "gpt2":
        return (shape["n_embd"], 4 * shape["n_embd"], shape["n_layer"], shape["n_head"])
    return (shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"], shape["num_attention_heads"])

"""A vocabulary the user did not set never overrides a factory's own default: the factory is called without
vocab_size, the vocabulary is read from its logits and the record says which; a given --vocab-size is passed."""
from __future__ import annotations

import torch

from perfconsole.core.measure import model_build
from perfconsole.core.settings import RunSpec

OWN = '''
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb, self.head = nn.Embedding(vocab, d), nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(self.emb(ids))


def build(ctx, vocab_size=321, d_model=8):
    return Tiny(vocab_size, d_model)


def needs(ctx, vocab_size, d_model=8):
    return Tiny(vocab_size, d_model)
'''


def _built(tmp_path, name: str, **spec):
    path = tmp_path / "own.py"
    path.write_text(OWN)
    return model_build.build(RunSpec(model=f"{path}:{name}", ctx=8, batch=1, device="cpu", **spec), torch.device("cpu"))


def test_a_factorys_own_vocabulary_holds_when_none_is_given(tmp_path):
    built = _built(tmp_path, "build")
    assert built.info.vocab_size == 321 and built.info.config["vocab_size"] == 321
    assert built.info.params == 321 * 8 + 8 * 321 + 321              # its own embedding and head, not 10,000's
    assert "its own vocab_size (321, read from its logits)" in built.info.origin


def test_a_given_vocabulary_is_passed_and_a_required_one_gets_the_builtins(tmp_path):
    given = _built(tmp_path, "build", vocab_size=500)
    assert given.info.vocab_size == 500 and "vocab_size=500" in given.info.origin
    required = _built(tmp_path, "needs")
    assert required.info.vocab_size == 10_000 and "vocab_size=10000" in required.info.origin


def test_the_builtin_keeps_its_vocabulary_of_ten_thousand():
    built = model_build.build(RunSpec(size="tiny", ctx=8, device="cpu"), torch.device("cpu"))
    assert built.info.vocab_size == 10_000 and RunSpec().vocab == 10_000

"""`--checkpoint blocks` on the builtin model, an hf architecture and a user's factory: the same losses and
gradients as without it, fewer tensors kept for the backward, and a run that says so in its label."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from perfconsole.core.measure import checkpointing, model_build
from perfconsole.core.measure import Unsupported
from perfconsole.core.settings import RunSpec, SpecError

FACTORY = Path(__file__).parents[3] / "docs" / "examples" / "student_model.py"
SPECS = {
    "builtin": RunSpec(size="tiny", ctx=16, batch=2, mode="train", device="cpu"),
    "hf": RunSpec(model="hf:llama", size="tiny", ctx=16, batch=2, mode="train", device="cpu"),
    "factory": RunSpec(model=f"{FACTORY}:build", ctx=16, batch=2, mode="train", device="cpu",
                       model_args=("d_model=32", "n_layers=3")),
}


def _step(spec: RunSpec, checkpoint: str) -> tuple[float, dict[str, torch.Tensor], int, int]:
    """(loss, gradients, blocks checkpointed, tensors saved for the backward) of one forward and backward."""
    torch.manual_seed(0)
    built = model_build.build(spec, torch.device("cpu"))
    inputs, targets = model_build.make_batch(built, spec, "cpu")
    blocks = checkpointing.apply(checkpoint, built.module)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        logits = model_build.logits_of(model_build.call(built.module, inputs))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
    loss.backward()
    grads = {n: p.grad.clone() for n, p in built.module.named_parameters() if p.grad is not None}
    return loss.item(), grads, blocks, len(saved)


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_checkpointed_blocks_compute_the_same_step_and_keep_fewer_tensors(kind):
    plain_loss, plain_grads, none, plain_saved = _step(SPECS[kind], "none")
    loss, grads, blocks, saved = _step(SPECS[kind], "blocks")
    assert none == 0 and blocks >= 2                     # every repeated block, found without annotations
    assert loss == pytest.approx(plain_loss, rel=1e-6)
    assert grads.keys() == plain_grads.keys()
    for name, g in grads.items():
        torch.testing.assert_close(g, plain_grads[name], rtol=1e-5, atol=1e-6, msg=name)
    assert saved < plain_saved                          # what checkpointing is for: less kept for the backward


def test_a_model_without_repeated_blocks_is_unsupported_and_fwd_is_refused_before_any_process():
    with pytest.raises(Unsupported, match="no repeated blocks"):
        checkpointing.apply("blocks", torch.nn.Linear(4, 4))
    with pytest.raises(SpecError, match="checkpoint: recomputes the forward in the backward; it needs mode"):
        SPECS["builtin"].with_(mode="fwd", checkpoint="blocks").validate()


def test_a_checkpointed_run_says_so_and_measures_the_same_losses():
    def run(*flags: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "perfconsole.core.cli.main", "run", "--size", "tiny", "--device",
                              "cpu", "--ctx", "16", "--batch", "2", "--mode", "train", "--warmup", "1", "--steps", "2",
                              "--json", *flags], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["data"]

    plain, ckpt = run(), run("--checkpoint", "blocks")
    assert ckpt["spec"]["checkpoint"] == "blocks" and ckpt["name"].endswith("train checkpoint-blocks")
    assert [s["loss"] for s in ckpt["steps"]] == pytest.approx([s["loss"] for s in plain["steps"]], rel=1e-5)

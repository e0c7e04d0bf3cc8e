"""FSDP as perfconsole wraps it (core.measure.distributed._fsdp), in a real one-process gloo group: the
settings reach FSDP, seen from inside the model's forward and backward."""
import json
import subprocess
import sys

import pytest

RANK = r"""
import json, sys
import torch, torch.distributed as dist
from perfconsole.core.measure.distributed import _fsdp
from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM

dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
model = TransformerLM(config_for("tiny", 16), "sdpa")
seen = {}


def look(module, inputs, output):
    seen.setdefault("weight", str(next(module.parameters()).dtype))


model.layers[0].register_forward_hook(look)
_fsdp(model, reshard=True, bf16=sys.argv[2] == "1")
with torch.autocast("cpu", dtype=torch.bfloat16):
    logits = model(torch.randint(0, 100, (2, 16)))
logits.float().sum().backward()
grad = next(model.layers[0].parameters()).grad
print(json.dumps({"in_forward": seen["weight"], "sharded": str(next(model.layers[0].parameters()).dtype),
                  "grad": str(grad.dtype)}))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("bf16, in_forward", [(False, "torch.float32"), (True, "torch.bfloat16")])
def test_fsdp_bf16_gathers_bf16_parameters_and_keeps_fp32_shards(tmp_path, bf16, in_forward):
    done = subprocess.run([sys.executable, "-c", RANK, str(tmp_path / "store"), "1" if bf16 else "0"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # A block's forward runs on the gathered parameters: bf16 under FSDP's mixed precision, else fp32
    # (autocast casts them per matmul). The shards AdamW updates, and their gradients, stay fp32.
    assert seen == {"in_forward": in_forward, "sharded": "torch.float32", "grad": "torch.float32"}

"""DDP and FSDP as perfconsole wraps them (core.measure.data_parallel), in a real one-process gloo group: the
settings reach FSDP, seen from inside the model's forward and backward, and torch.compile's treatment of
DDP, seen in the graphs it compiles."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e   # every test here runs a torch.distributed rank in a child (tests/tiers.py)

RANK = r"""
import json, sys
import torch, torch.distributed as dist
from perfconsole.core.measure.data_parallel import _fsdp
from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM

dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
out = {}
for bf16 in ("0", "1"):  # a model of its own for each setting
    model = TransformerLM(config_for("tiny", 16), "sdpa")
    seen = {}

    def look(module, inputs, output):
        seen.setdefault("weight", str(next(module.parameters()).dtype))

    model.layers[0].register_forward_hook(look)
    _fsdp(model, reshard=True, bf16=bf16 == "1")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(torch.randint(0, 100, (2, 16)))
    logits.float().sum().backward()
    grad = next(model.layers[0].parameters()).grad
    out[bf16] = {"in_forward": seen["weight"], "sharded": str(next(model.layers[0].parameters()).dtype),
                 "grad": str(grad.dtype)}
print(json.dumps(out))
dist.destroy_process_group()
"""


def _rank(tmp_path_factory, program: str, timeout: float) -> dict:
    """What one rank process (a one-process gloo group) printed last, as JSON: both settings of a test, a process
    for the pair (each is a fresh interpreter importing torch's distributed and compiler stacks)."""
    store = tmp_path_factory.mktemp("rank") / "store"
    done = subprocess.run([sys.executable, "-c", program, str(store)], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fsdp_seen(tmp_path_factory) -> dict:
    return _rank(tmp_path_factory, RANK, 120)


@pytest.mark.parametrize("bf16, in_forward", [(False, "torch.float32"), (True, "torch.bfloat16")])
def test_fsdp_bf16_gathers_bf16_parameters_and_keeps_fp32_shards(fsdp_seen, bf16, in_forward):
    seen = fsdp_seen["1" if bf16 else "0"]
    # A block's forward runs on the gathered parameters: bf16 under FSDP's mixed precision, else fp32
    # (autocast casts them per matmul). The shards AdamW updates, and their gradients, stay fp32.
    assert seen == {"in_forward": in_forward, "sharded": "torch.float32", "grad": "torch.float32"}


DDP_RANK = r"""
import json, sys
import torch, torch.distributed as dist
from perfconsole.core.measure.data_parallel import Rank, wrap_model
from perfconsole.core.settings import RunSpec


class Stack(torch.nn.Module):  # the user's own module: Dynamo does not start a frame in torch.nn's code
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(512, 512) for _ in range(8))  # 1.05 MB each

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
out = {}
for mode in ("ddp_optimizer", "no_optimization"):  # a model and a compile of its own for each
    torch._dynamo.reset()
    model = Stack()
    spec = RunSpec(device="cpu", nproc=2, parallel="ddp", compile=True, bucket_mb=2, optimize_ddp=mode)
    ddp, _ = wrap_model(spec.validate().section("parallel"), model, Rank(0, 1, 0, torch.device("cpu"), None))
    graphs = []

    def backend(gm, example_inputs):  # what torch.compile hands its backend: one graph, or DDPOptimizer's pieces
        graphs.append(sum(n.op == "call_module" or n.op == "call_function" for n in gm.graph.nodes))
        return gm.forward

    torch.compile(ddp, backend=backend)(torch.randn(4, 512)).sum().backward()
    out[mode] = {"graphs": graphs, "grads": all(p.grad is not None for p in model.parameters())}
print(json.dumps(out))
dist.destroy_process_group()
"""


@pytest.fixture(scope="module")
def ddp_seen(tmp_path_factory) -> dict:
    return _rank(tmp_path_factory, DDP_RANK, 180)


@pytest.mark.parametrize("mode", ["ddp_optimizer", "no_optimization"])
def test_optimize_ddp_decides_whether_compile_splits_ddp_at_its_buckets(ddp_seen, mode):
    seen = ddp_seen[mode]
    # DDPOptimizer hands the backend one piece per bucket of about 2 MB (two layers); compiled whole, the
    # eight layers are one graph.
    assert seen["grads"] and (len(seen["graphs"]) >= 3 if mode == "ddp_optimizer" else seen["graphs"] == [8]), seen

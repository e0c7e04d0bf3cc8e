"""One rank of a DDP job that measures its collectives alone (core.measure.collectives); run by torchrun.

    torchrun --nproc-per-node N tests/core/measure/collectives_rank.py cuda|cpu ddp|fsdp none|bf16
A model of eight blocks (`layers`) under DDP (bf16: its bf16 hook), or FSDP2 per block as perfconsole
shards it (bf16: FSDP's bf16 mixed precision). Rank 0 prints
the figures as one JSON line, with the model's parameter count beside them.
"""
import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from perfconsole.core.measure import collectives
from rank_join import join  # beside this script: torchrun puts its folder on the path

cuda, parallel, hook = sys.argv[1] == "cuda", sys.argv[2], sys.argv[3]
local, device = join(cuda)
exchange = dist.new_group(backend="gloo")


class Blocks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(256, 256) for _ in range(8))
        self.head = torch.nn.Linear(256, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


model = Blocks().to(device)
params = sum(p.numel() for p in model.parameters())
if parallel == "ddp":
    wrapped = DDP(model, device_ids=[local] if cuda else None, bucket_cap_mb=0.5)
else:
    from perfconsole.core.measure.data_parallel import _fsdp
    wrapped = _fsdp(model, bf16=hook == "bf16")
for _ in range(3):  # DDP rebuilds its buckets in the second step, and logs them after it
    wrapped(torch.randn(4, 256, device=device)).float().sum().backward()
found = collectives.measure(wrapped, parallel, hook if parallel == "ddp" else "none", device,
                            dist.get_world_size(), exchange, fsdp_bf16=parallel == "fsdp" and hook == "bf16")
if dist.get_rank() == 0:
    print(json.dumps({**found, "params": params}), flush=True)
dist.destroy_process_group()

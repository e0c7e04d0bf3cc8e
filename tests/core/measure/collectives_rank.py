"""One rank of a DDP job that measures its collectives alone (core.measure.collectives); run by torchrun.

    torchrun --nproc-per-node N tests/core/measure/collectives_rank.py cuda|cpu none|bf16
Rank 0 prints the figures as one JSON line, with the model's parameter count beside them.
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from perfconsole.core.measure import collectives

cuda, hook = sys.argv[1] == "cuda", sys.argv[2]
local = int(os.environ["LOCAL_RANK"])
if cuda:
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=device)
else:
    device = torch.device("cpu")
    dist.init_process_group("gloo")
exchange = dist.new_group(backend="gloo")
model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).to(device)
ddp = DDP(model, device_ids=[local] if cuda else None, bucket_cap_mb=0.5)
for _ in range(3):  # DDP rebuilds its buckets in the second step, and logs them after it
    ddp(torch.randn(4, 256, device=device)).sum().backward()
found = collectives.measure(ddp, hook, device, dist.get_world_size(), exchange)
if dist.get_rank() == 0:
    print(json.dumps({**found, "params": sum(p.numel() for p in model.parameters())}), flush=True)
dist.destroy_process_group()

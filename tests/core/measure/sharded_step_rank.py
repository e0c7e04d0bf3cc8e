"""One rank of two DDP jobs over the same model and batches: plain DDP with AdamW, then ZeRO-2 in DDP's comm hook
(core.measure.sharded_step); rank 0 prints, as one JSON line, the largest difference between their parameters
after the steps, how many buckets the sharded job stepped as slices and how many ended past their last whole slice.

    torchrun --nproc-per-node N tests/core/measure/sharded_step_rank.py cuda|cpu [no_sync]
With `no_sync` the last step runs under DDP's no_sync (the job's compute-only steps): it must still step every slice
and leave every rank's parameters equal to the others'.
"""
import json
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from perfconsole.core.measure.sharded_step import ShardedStep
from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM
from rank_join import join  # beside this script: torchrun puts its folder on the path

cuda, no_sync = sys.argv[1] == "cuda", "no_sync" in sys.argv[2:]
local, device = join(cuda)
rank, world = dist.get_rank(), dist.get_world_size()
cfg = config_for("tiny", 32)
STEPS = 5


def train(sharded: bool) -> tuple[list[torch.Tensor], ShardedStep | None]:
    torch.manual_seed(0)
    model = TransformerLM(cfg, "sdpa").to(device)
    ddp = DDP(model, device_ids=[local] if cuda else None, gradient_as_bucket_view=True, bucket_cap_mb=0.5)
    kw = {"fused": True} if cuda else {"foreach": True}
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3, **kw)
    stepper = None
    if sharded:
        stepper = ShardedStep(rank, world)
        stepper.full, stepper.make = opt, lambda params: torch.optim.AdamW(params, lr=1e-3, **kw)
        ddp.register_comm_hook(None, stepper.hook)
        opt = stepper
    g = torch.Generator().manual_seed(rank)
    for i in range(STEPS):
        ids = torch.randint(0, cfg.vocab_size, (2, 33), generator=g).to(device)
        opt.zero_grad(set_to_none=True)
        ctx = ddp.no_sync() if no_sync and i == STEPS - 1 else torch.enable_grad()
        with ctx:
            out = ddp(ids[:, :-1])
            F.cross_entropy(out.reshape(-1, out.shape[-1]).float(), ids[:, 1:].reshape(-1)).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()], stepper


plain, _ = train(False)
shard, stepper = train(True)
diff = max((a - b).abs().max().item() for a, b in zip(plain, shard))
# every rank's parameters equal to rank 0's (the gathers reached every rank)
flat = torch.cat([p.reshape(-1) for p in shard])
first = flat.clone()
dist.broadcast(first, 0)
apart = (flat - first).abs().max()
dist.all_reduce(apart, op=dist.ReduceOp.MAX)
slices = list(stepper._slices.values())
if rank == 0:
    print(json.dumps({"max_diff": diff, "ranks_apart": apart.item(), "slices": len(slices),
                      "tails": sum(s.tail is not None for s in slices), "started": stepper.started}), flush=True)
dist.barrier()
dist.destroy_process_group()

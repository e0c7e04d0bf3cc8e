"""The collectives alone: what a data-parallel step's communication costs with nothing else running,
and the bus bandwidth of the link it runs over.

After the quiet steps, every rank runs the step's collectives back to back with no compute beside them,
in the dtype they carry:
- DDP: one all-reduce per gradient bucket, of the sizes DDP's buckets have (read from DDP's own logging
  data, after it rebuilt its buckets in the order the gradients became ready), in the parameters' dtype
  or bf16 under the bf16 compression hook.
- FSDP (`fully_shard` per Transformer block, then the root; core.measure.data_parallel): per block, an
  all-gather of its parameters for the forward, another for the backward (a block is resharded after
  its forward, unless the spec keeps it gathered: `reshard` False) and a reduce-scatter of its
  gradients; the root's own parameters (embeddings, final norm, head) gathered once and reduced once.
  In the parameters' dtype, or bf16 under FSDP's bf16 mixed precision (`fsdp_bf16`).
- ZeRO-2 (`zero2`, DDP: core.measure.sharded_step): per bucket a reduce-scatter of its gradients and an all-gather
  of its parameters after the step, in place of its all-reduce; the elements past each bucket's last whole slice
  in one small all-reduce.
- ZeRO-1 (`zero`, DDP): beside DDP's all-reduces, the broadcasts ZeroRedundancyOptimizer makes after its step,
  each rank's shard of the parameters to the others, modelled as one equal shard from each rank.
That is the step's communication at the speed the link gives it; held against `exposed_comm_ms` it says
how much of it the step failed to hide, and against `comm_ms` how much longer the collectives took
beside the backward.

The link's bus bandwidth is measured in the same job, with one all-reduce of LINK_BYTES: which GPUs a
job gets (two on one NVLink switch, or across PCIe or nodes) sets it, so a figure kept per machine
could describe another pair. It takes about 20 ms on two H200s (1 GiB at about 330 GB/s, six times);
on the CPU gloo sums 16 MiB.

Bus bandwidth is the figure nccl-tests calls busbw, comparable across world sizes and collectives: the
full tensor's bytes x 2(n-1)/n for an all-reduce, x (n-1)/n for an all-gather or a reduce-scatter, over
the time. Each figure is the fastest of REPEATS timed series after one warm-up, every series started
together on all ranks (a barrier on the host): CUDA events on the GPU, perf_counter around gloo's
synchronous calls on the CPU.
"""
from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

Op = tuple[str, int]  # (all_reduce | all_gather | reduce_scatter, elements of the full tensor)

LINK_BYTES = {"cuda": 1 << 30, "cpu": 16 << 20}  # fp32: a bf16 sum costs gloo a conversion
REPEATS = 5


def bucket_bytes(ddp: torch.nn.Module) -> tuple[list[int], str]:
    """The sizes in bytes of DDP's gradient buckets and where they came from: its rebuilt buckets (after
    the first step), its first ones, or the gradients as one buffer when DDP gives neither."""
    try:
        data = ddp._get_ddp_logging_data()  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - a DDP without its logger: the gradients as one buffer
        data = {}
    for key, source in (("rebuilt_bucket_sizes", "DDP's buckets"), ("bucket_sizes", "DDP's first buckets")):
        text = data.get(key)
        if isinstance(text, str) and text.strip():
            return [int(x) for x in text.split(",") if x.strip()], source
    params = [p for p in ddp.parameters() if p.requires_grad]
    return [sum(p.numel() * p.element_size() for p in params)], "the gradients as one buffer"


def fused_bucket_bytes(ddp: torch.nn.Module, cap_mb: float) -> list[int]:
    """Compiled autograd's all-reduces as inductor's DDP fusion makes them (torch/_inductor/fx_passes/ddp_fusion.py,
    `_bucket_size_fusion`): the gradients in the order the backward makes them (the parameters reversed), a bucket
    closed once it holds 1 MiB (the first) or `cap_mb` MiB (each after it), the last with what is left."""
    cap = int(cap_mb * (1 << 20))
    sizes: list[int] = []
    held, limit = 0, 1 << 20
    for p in reversed([p for p in ddp.parameters() if p.requires_grad]):
        held += p.numel() * p.element_size()
        if held >= limit:
            sizes.append(held)
            held, limit = 0, cap
    return sizes + [held] if held else sizes


def ddp_ops(ddp: torch.nn.Module, comm_hook: str) -> tuple[list[Op], torch.dtype, dict[str, Any]]:
    sizes, source = bucket_bytes(ddp)
    extra: dict[str, Any] = {}
    if getattr(ddp, "_use_python_reducer", False):  # optimize_ddp python_reducer: no C++ buckets run
        from torch._dynamo.utils import counters
        from torch._inductor import config

        # the bucket size inductor's fusion reads: DDP sets it to its bucket_cap_mb, and a size below 1 MB reads 0
        # (each gradient after the first MiB all-reduced alone)
        cap_mb = config._fuse_ddp_bucket_size
        sizes = fused_bucket_bytes(ddp, cap_mb)
        source = (f"inductor's fused all-reduces under compiled autograd (the first of 1 MiB, then {cap_mb:g} MiB "
                  "each: inductor's DDP bucket size)")

        # how many inductor made where it compiled the backward in this process (none where its graph came from the
        # compile cache): the figure the buckets above are checked against
        extra["inductor_buckets"] = counters["inductor"].get("ddp_buckets")
    param = next(p for p in ddp.parameters() if p.requires_grad)
    dtype = torch.bfloat16 if comm_hook == "bf16" and param.dtype != torch.bfloat16 else param.dtype
    ops = [("all_reduce", max(1, b // param.element_size())) for b in sizes]  # a bucket holds the params' dtype
    return ops, dtype, {"buckets": len(sizes), "source": source, **extra}


def fsdp_ops(model: torch.nn.Module, reshard: bool, bf16: bool = False) -> tuple[list[Op], torch.dtype, dict[str, Any]]:
    """FSDP's units as core.measure.data_parallel shards them: `model.layers`' blocks, then the root. A
    block kept gathered after its forward (`reshard` False) is gathered once; with FSDP's bf16 mixed
    precision every collective carries bf16."""
    blocks = list(getattr(model, "layers", []))
    sizes = [sum(p.numel() for p in b.parameters() if p.requires_grad) for b in blocks]
    root = sum(p.numel() for p in model.parameters() if p.requires_grad) - sum(sizes)
    gathers = (("all_gather",) * (2 if reshard else 1)) + ("reduce_scatter",)
    ops: list[Op] = [(kind, n) for n in sizes for kind in gathers]
    if root > 0:
        ops += [("all_gather", root), ("reduce_scatter", root)]
    dtype = torch.bfloat16 if bf16 else next(p for p in model.parameters() if p.requires_grad).dtype
    return ops, dtype, {"units": len(sizes) + (root > 0), "source": "FSDP's units"}


def zero_ops(model: torch.nn.Module, world: int) -> list[Op]:
    """ZeRO-1's broadcasts after its step (ZeroRedundancyOptimizer): each rank sends its shard of the parameters to
    the others; ZeRO partitions them by size, so `world` shards of about equal size, from rank 0, 1, ... in turn."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return [("broadcast", max(1, total // world))] * world


def zero2_ops(ddp: torch.nn.Module, world: int) -> list[Op]:
    """ZeRO-2 inside DDP (core.measure.sharded_step): each bucket's gradients reduce-scattered and its parameters
    all-gathered after the step, in place of the bucket's all-reduce; the elements past each bucket's last whole
    slice all-reduced together, once."""
    sizes, _ = bucket_bytes(ddp)
    item = next(p for p in ddp.parameters() if p.requires_grad).element_size()
    ops: list[Op] = [(kind, max(1, b // item)) for b in sizes for kind in ("reduce_scatter", "all_gather")]
    tails = sum((b // item) % world for b in sizes)
    return ops + ([("all_reduce", tails)] if tails else [])


def _factor(kind: str, world: int) -> float:
    if kind == "broadcast":
        return 1.0
    return (2 if kind == "all_reduce" else 1) * (world - 1) / world


def bus_gbps(ops: list[Op], item: int, world: int, ms: float) -> float:
    return sum(n * item * _factor(kind, world) for kind, n in ops) / (ms * 1e6)


def _series_ms(ops: list[Op], dtype: torch.dtype, device: torch.device, world: int, exchange: Any) -> float:
    """The fastest of REPEATS runs of `ops`, back to back, after one warm-up. A gathered or scattered
    tensor is padded to a multiple of the world size, as FSDP pads its shards."""
    ops = [(kind, -(-n // world) * world if kind in ("all_gather", "reduce_scatter") else n) for kind, n in ops]
    full = torch.zeros(max(n for _, n in ops), dtype=dtype, device=device)
    shard = torch.zeros(max(n // world for _, n in ops) or 1, dtype=dtype, device=device)
    cuda = device.type == "cuda"

    def series() -> None:
        sent = 0  # broadcasts: from each rank in turn
        for kind, n in ops:
            if kind == "all_reduce":
                dist.all_reduce(full[:n])
            elif kind == "broadcast":
                dist.broadcast(full[:n], src=sent % world)
                sent += 1
            elif kind == "all_gather":
                dist.all_gather_into_tensor(full[:n], shard[:n // world])
            else:
                dist.reduce_scatter_tensor(shard[:n // world], full[:n])

    series()
    best = float("inf")
    for _ in range(REPEATS):
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier(group=exchange)  # every rank starts the series together
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            series()
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            series()
            best = min(best, (time.perf_counter() - t0) * 1e3)
    return best


def measure(model: torch.nn.Module, parallel: str, comm_hook: str, device: torch.device, world: int,
            exchange: Any, reshard: bool = True, fsdp_bf16: bool = False, zero: bool = False,
            zero2: bool = False) -> dict[str, Any]:
    """Every rank calls this together and gets the same kind of figures (rank 0's are the record's)."""
    ops, dtype, out = ddp_ops(model, comm_hook) if parallel == "ddp" else fsdp_ops(model, reshard, fsdp_bf16)
    if zero2:
        ops = zero2_ops(model, world)
        out["source"] += ", each reduce-scattered and its parameters all-gathered (ZeRO-2)"
    if zero:
        ops = ops + zero_ops(model, world)
        out["source"] += "; ZeRO-1's broadcasts of the parameters' shards after the step"
    item = torch.empty((), dtype=dtype).element_size()
    counts = {k: sum(kind == k for kind, _ in ops) for k in ("all_reduce", "all_gather", "reduce_scatter", "broadcast")}
    out.update(dtype=str(dtype).removeprefix("torch."), world=world, repeats=REPEATS,
               bytes=sum(n for _, n in ops) * item,  # the full tensors' bytes, every collective of the step
               ops={k: v for k, v in counts.items() if v})
    link = LINK_BYTES[device.type]
    need = max(max(n for _, n in ops) * item * (1 + 1 / world), link)
    if not _all_have(need, device, exchange):  # decided together: a rank alone in a collective waits forever
        out["error"] = f"not measured: a rank had less than {need / 2**20:,.0f} MiB of GPU memory free"
        return out
    ms = _series_ms(ops, dtype, device, world, exchange)
    link_ms = _series_ms([("all_reduce", link // 4)], torch.float32, device, world, exchange)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    out.update(alone_ms=ms, busbw_gbps=bus_gbps(ops, item, world, ms),
               link_bytes=link, link_ms=link_ms, link_busbw_gbps=bus_gbps([("all_reduce", link // 4)], 4, world, link_ms))
    return out


def _all_have(nbytes: float, device: torch.device, exchange: Any) -> bool:
    """Whether every rank has `nbytes` of device memory free, counting what PyTorch's allocator holds
    unused (a large train step can leave much of the GPU reserved), which it frees for a block it lacks;
    the CPU's is not counted."""
    ok = True
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        ok = free > nbytes * 1.1 + (256 << 20)
    flag = torch.tensor([int(ok)])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=exchange)
    return bool(flag.item())

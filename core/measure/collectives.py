"""The collectives alone: what a DDP step's communication costs with nothing else running, and the
bus bandwidth of the link it runs over.

After the quiet steps, every rank all-reduces buffers of the sizes DDP's buckets have (read from DDP's
own logging data, after it rebuilt its buckets in the order the gradients became ready), in the dtype
DDP sends (the parameters', or bf16 under the bf16 compression hook), back to back as DDP issues them,
with no compute beside them. That is the step's communication at the speed the link gives it; held
against `exposed_comm_ms` it says how much of it the step failed to hide, and against `comm_ms` how much
longer the collectives took beside the backward.

The link's bus bandwidth is measured in the same job, with one all-reduce of LINK_BYTES: which GPUs a
job gets (two on one NVLink switch, or across PCIe or nodes) sets it, so a figure kept per machine
could describe another pair. It takes about 20 ms on two H200s (1 GiB at about 330 GB/s, six times);
on the CPU gloo sums 16 MiB.

Bus bandwidth is the figure nccl-tests calls busbw: bytes x 2(n-1)/n over the time, which for a ring
all-reduce is what each link carried, comparable across world sizes. Each figure is the fastest of
REPEATS timed series after one warm-up, every series started together on all ranks (a barrier on the
host): CUDA events on the GPU, perf_counter around gloo's synchronous calls on the CPU.
"""
from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

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


def sent_dtype(ddp: torch.nn.Module, comm_hook: str) -> torch.dtype:
    param = next(p for p in ddp.parameters() if p.requires_grad)
    return torch.bfloat16 if comm_hook == "bf16" and param.dtype != torch.bfloat16 else param.dtype


def bus_gbps(nbytes: int, ms: float, world: int) -> float:
    return nbytes * 2 * (world - 1) / world / (ms * 1e6)


def _series_ms(sizes: list[int], dtype: torch.dtype, device: torch.device, exchange: Any) -> float:
    """The fastest of REPEATS runs of one all-reduce per size (in elements), back to back, after one warm-up."""
    buf = torch.zeros(max(sizes), dtype=dtype, device=device)
    cuda = device.type == "cuda"

    def series() -> None:
        for n in sizes:
            dist.all_reduce(buf[:n])

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
    del buf
    return best


def measure(ddp: torch.nn.Module, comm_hook: str, device: torch.device, world: int, exchange: Any) -> dict[str, Any]:
    """Every rank calls this together and gets the same kind of figures (rank 0's are the record's)."""
    sizes, source = bucket_bytes(ddp)
    dtype = sent_dtype(ddp, comm_hook)
    param_size = next(p for p in ddp.parameters() if p.requires_grad).element_size()
    elems = [max(1, b // param_size) for b in sizes]  # a bucket holds gradients of the parameters' dtype
    item = torch.empty((), dtype=dtype).element_size()
    sent = sum(elems) * item
    link = LINK_BYTES[device.type]
    out: dict[str, Any] = {"buckets": len(sizes), "source": source, "dtype": str(dtype).removeprefix("torch."),
                           "bytes": sent, "world": world, "repeats": REPEATS}
    need = max(max(elems) * item, link)
    if not _all_have(need, device, exchange):  # decided together: a rank alone in a collective waits forever
        out["error"] = f"not measured: a rank had less than {need / 2**20:,.0f} MiB of GPU memory free"
        return out
    ms = _series_ms(elems, dtype, device, exchange)
    link_ms = _series_ms([link // 4], torch.float32, device, exchange)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    out.update(alone_ms=ms, busbw_gbps=bus_gbps(sent, ms, world),
               link_bytes=link, link_ms=link_ms, link_busbw_gbps=bus_gbps(link, link_ms, world))
    return out


def _all_have(nbytes: int, device: torch.device, exchange: Any) -> bool:
    """Whether every rank has `nbytes` of device memory free (the CPU's is not counted)."""
    ok = device.type != "cuda" or torch.cuda.mem_get_info(device)[0] > nbytes * 1.1 + (256 << 20)
    flag = torch.tensor([int(ok)])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=exchange)
    return bool(flag.item())

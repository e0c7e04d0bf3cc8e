"""What the data-parallel ladder (`ladder --nproc N`) decides between its rungs, from the rungs already run.

- **One baseline per program.** Each rung's weak scaling is against its one-process program
  (core.launch.scaling.one_process: the same model and settings without the data-parallel ones). Rungs that
  differ only in data-parallel settings share that program, so it runs once, with the first rung that needs
  it, and the later rungs take its figures (the record says whose).
- **A rung that will not fit says so before it runs.** From the peak memory a finished rung measured (same
  compile setting, so the same activations) and the bytes of state each rung keeps per GPU (parameters,
  gradients, DDP's buckets, AdamW's two moments; FSDP's shards and the parameters it keeps gathered), the
  rung's peak is estimated (from a rung of the same wrapper where one ran: across DDP and FSDP the estimate is
  rougher); over MEMORY_EDGE of the card, it ends `oom` with the estimate, without a process. How close it
  came on 2x H200 is in docs/results/dp_ladder_2xh200.md.
  Without such a rung (the first, or the first compiled one) there is no estimate: a rung out of memory
  then ends as a clean `oom` record of its own process.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.scaling import one_process
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

MEMORY_EDGE = 0.97  # of the card's memory: above it a rung is not started (CUDA's context and fragmentation)
MIB = 2**20


def _program(spec: RunSpec) -> RunSpec:
    return one_process(spec).with_(profile="none")


def shared_baseline(runs: list[tuple[str, RunRecord]], spec: RunSpec) -> ev.Baseline | None:
    """The one-process run of an earlier rung whose program is this spec's too, its source in words."""
    mine = _program(spec)
    for name, r in runs:
        if r.baseline and r.baseline.get("status") == "ok" and r.baseline.get("summary") and _program(r.spec) == mine:
            return ev.Baseline("ok", r.baseline["summary"],
                               f"the one-process run of rung {name} (the same program, measured once for the ladder)")
    return None


def state_bytes(spec: RunSpec, params: int) -> float:
    """Bytes of training state one GPU holds at its peak for this spec: parameters, gradients and AdamW's two
    moments in the weights' dtype, plus DDP's gradient buckets and, under the bf16 hook, their bf16 copies; or
    FSDP's 1/N shards of all four plus the parameters a block keeps gathered from its forward to its backward (no
    reshard). Buckets count with gradients as bucket views too: on 2x H200, 2.7B, DDP peaked at 68.2 GiB with
    and without them (the views save the copy in the steps, not the peak)."""
    w = 2 if spec.weights == "bf16" else 4
    if spec.parallel == "fsdp":
        kept = 0 if spec.reshard else params * (2 if spec.fsdp_bf16 else w)
        return 4 * params * w / spec.nproc + kept
    if spec.parallel != "ddp":
        return 4 * params * w
    return 5 * params * w + (2 * params if spec.comm_hook == "bf16" else 0)


def memory_estimate(runs: list[tuple[str, RunRecord]], spec: RunSpec) -> dict[str, Any] | None:
    """The rung's estimated peak per GPU from the last finished rung of the same compile setting (of the same
    wrapper where one finished): {"from", "measured_mib", "estimate_mib", "card_mib", "fits"}; None without such
    a rung or the card's size."""
    usable = [(name, r) for name, r in runs
              if r.status == "ok" and r.summary is not None and r.summary.peak_allocated_mib
              and (r.model or {}).get("params") and r.environment.get("gpu_memory_mib")
              and r.spec.compile == spec.compile and r.spec.nproc == spec.nproc]
    usable.sort(key=lambda nr: nr[1].spec.parallel == spec.parallel)  # stable: the same wrapper's last rung last
    if not usable:
        return None
    name, r = usable[-1]
    params, card, peak = r.model["params"], r.environment["gpu_memory_mib"], r.summary.peak_allocated_mib
    est = peak + (state_bytes(spec, params) - state_bytes(r.spec, params)) / MIB
    return {"from": name, "measured_mib": peak, "estimate_mib": est, "card_mib": card, "fits": est <= MEMORY_EDGE * card}


def refusal_text(est: dict[str, Any]) -> str:
    gib = 1024
    return (f"estimated {est['estimate_mib'] / gib:,.1f} GiB per GPU, over {MEMORY_EDGE:.0%} of the card's "
            f"{est['card_mib'] / gib:,.1f} GiB: rung {est['from']} peaked at {est['measured_mib'] / gib:,.1f} GiB, and "
            "this rung keeps more parameters, gradients, buckets or optimizer state per GPU (not started)")


class Refused:
    """A rung ended before any process: its stream is the reason, as an `oom` error, and `Finished`."""
    pid = None

    def __init__(self, kind: str, text: str) -> None:
        self.kind, self.text = kind, text

    def start(self, hold: bool = False) -> None:
        pass

    def wait_ready(self) -> None:
        pass

    def events(self) -> Iterator[ev.Event]:
        yield ev.Error(self.kind, self.text)
        yield ev.Finished(self.kind)

    def cancel(self) -> None:
        pass

    kill = discard = cancel

"""How soon a data-parallel job's first step comes, forked from a warm process (torchrun and its ranks: core.launch.
warm_rank) against cold (PERFCONSOLE_WARM=off), cold and warm taking turns.

    python docs/results/probes/dp_first_step.py --device cuda --rounds 3 > out.json   # two GPUs
    python docs/results/probes/dp_first_step.py --device cpu --rounds 3                 # gloo, tiny

Prints one JSON object: each job's start, seconds from asking for its first event to `run_started` (rank 0's
worker up) and to its first step event (a warm-up step done), the median step, and the medians per kind. A first
job (not counted) measures the device's peaks and caches the FLOP count in the data folder.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def job(device: str):
    from perfconsole.core.settings import RunSpec

    if device == "cuda":
        return RunSpec(size="small", ctx=256, batch=4, device="cuda", precision="bf16", mode="train", warmup=2, steps=5,
                       nproc=2, parallel="ddp")
    return RunSpec(size="tiny", ctx=32, batch=2, device="cpu", mode="train", warmup=1, steps=3, nproc=2, parallel="ddp")


def once(spec, cold: bool) -> dict:
    from perfconsole.core.launch import warm
    from perfconsole.core.launch.launcher import Launch
    from perfconsole.core.record import RunRecord

    if cold:
        os.environ[warm.OFF_VAR] = "off"
    else:
        os.environ.pop(warm.OFF_VAR, None)
    launch, record = Launch(spec), RunRecord(spec)
    t0 = time.monotonic()
    started = first = None
    for event in launch.events():
        now = time.monotonic() - t0
        if event.type == "run_started" and started is None:
            started = now
        if event.type == "step" and first is None:
            first = now
        record.apply(event)
    return {"how": "cold" if cold else "warm", "status": record.status, "start": record.environment.get("start"),
            "to_run_started_s": round(started, 3) if started is not None else None,
            "to_first_step_s": round(first, 3) if first is not None else None,
            "median_step_ms": record.summary.total_ms.median if record.summary else None}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    from perfconsole.core.launch import warm

    own = warm.start_own()
    assert own is not None and own.wait_ready() is None, "no warm process"
    spec = job(args.device)
    try:
        once(spec, cold=True)  # peaks and FLOPs into the data folder, not counted
        runs = [once(spec, cold) for _ in range(args.rounds) for cold in (True, False)]
    finally:
        warm.stop_own()
    medians = {how: {key: statistics.median(r[key] for r in runs if r["how"] == how)
                     for key in ("to_run_started_s", "to_first_step_s")} for how in ("cold", "warm")}
    json.dump({"spec": spec.to_dict(), "runs": runs, "medians": medians}, sys.stdout, indent=1)
    print()
    return 0 if all(r["status"] == "ok" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

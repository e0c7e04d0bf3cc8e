"""Where the spread between processes of one host-bound spec comes from (docs/results/nsys_headline_h100.md).

Plain runs of the same spec (`large`, fp16 train, ctx 512, batch 4: eager and host-bound on an H100), each a
fresh worker as `perfconsole run` starts it, alternating arms: free (as perfconsole starts it), pinned
(`taskset -c CPUS`, the worker and all its threads on a few fixed CPUs), fixed (`setarch -R`, no address
space randomisation, and PYTHONHASHSEED=0: every process laid out alike), notel (no NVML sampling in the parent),
omp1 (OMP_NUM_THREADS=1) and nogc (the worker's cyclic garbage collector off). For each process: its median and
minimum step, the host's median issue time per step, the median SM clock over its measured steps (NVML, as
every run records it), and the CPU time the hypervisor took from this machine meanwhile (steal, /proc/stat).
With --canary, a pure-Python loop of fixed work runs in a process of its own beside everything, timing each
chunk: its median chunk during each run says whether the host itself was slow then (no GPU, no torch in it).
--spec small-bf16 takes a second host-bound spec (no GradScaler, so no sync in the step).

    python docs/results/probes/spread_probe.py --processes 12 --arms free,pinned --cpus 4-7 --out DIR   (GPU machine)
    python docs/results/probes/spread_probe.py --processes 8 --arms free --canary --spec small-bf16 --out DIR
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec

SPECS = {"large-fp16": RunSpec(size="large", ctx=512, batch=4, precision="fp16", mode="train", device="cuda",
                               warmup=3, steps=10),
         "small-bf16": RunSpec(size="small", ctx=256, batch=2, precision="bf16", mode="train", device="cuda",
                               warmup=3, steps=20)}
SPEC = SPECS["large-fp16"]
CANARY = """
import sys, time
out = open(sys.argv[1], "w", buffering=1)
while True:
    t0 = time.monotonic(); x = 0
    for i in range(100000):
        x += i * i
    t1 = time.monotonic()
    out.write(f"{t1:.4f} {1000 * (t1 - t0):.3f}\\n")
"""


def canary_ms(path: Path, start: float, end: float) -> float | None:
    """The canary's median chunk (ms) that ended between `start` and `end` (time.monotonic, one clock)."""
    chunks = []
    for line in path.read_text().splitlines():
        try:
            t, ms = (float(v) for v in line.split())
        except ValueError:
            continue
        if start <= t <= end:
            chunks.append(ms)
    return statistics.median(chunks) if chunks else None


class PinnedLaunch(Launch):
    """The worker under `taskset -c CPUS`: it and every thread it starts stay on those CPUs."""
    cpus = "4-7"

    def command(self):
        argv = super().command()
        return None if argv is None else ["taskset", "-c", self.cpus, *argv]


class FixedLaunch(Launch):
    """The worker with no address space randomisation and a fixed hash seed: every process laid out alike."""

    def command(self):
        argv = super().command()
        return None if argv is None else ["setarch", os.uname().machine, "-R", *argv]


NOGC = Path("/tmp/spread-probe-nogc")  # a sitecustomize that turns Python's cyclic collector off in the worker
ARMS = {"free": (Launch, {}), "pinned": (PinnedLaunch, {}), "fixed": (FixedLaunch, {"PYTHONHASHSEED": "0"}),
        "notel": (Launch, {"PERFCONSOLE_TELEMETRY": "0"}),  # no NVML sampler in the parent while it measures
        "omp1": (Launch, {"OMP_NUM_THREADS": "1"}),  # one intra-op thread: no OpenMP pool spinning beside it
        "nogc": (Launch, {"PYTHONPATH": f"{NOGC}:{os.environ.get('PYTHONPATH', '')}"})}


def steal_jiffies() -> tuple[int, int]:
    """(steal, all) jiffies of the machine so far, from /proc/stat's cpu line."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[7], sum(fields)


def one(arm: str, out: Path, index: int, canary: Path | None = None) -> dict:
    cls, env = ARMS[arm]
    launch = cls(SPEC, out_dir=out / f"{arm}-{index}", env=env)
    record = RunRecord(SPEC)
    steal0, all0 = steal_jiffies()
    started = time.monotonic()
    for event in launch.events():
        record.apply(event)
    steal1, all1 = steal_jiffies()
    steps = [s.total_ms for s in record.steps]
    host = [s.host_ms for s in record.steps if s.host_ms is not None]
    clock = ((record.telemetry or {}).get("summary") or {}).get("sm_clock_mhz") or {}
    return {"arm": arm, "index": index, "status": record.status, "seconds": round(time.monotonic() - started, 1),
            "median_ms": statistics.median(steps) if steps else None, "min_ms": min(steps) if steps else None,
            "host_median_ms": statistics.median(host) if host else None, "sm_clock_median_mhz": clock.get("median"),
            "steal_share": (steal1 - steal0) / max(1, all1 - all0), "steps_ms": [round(v, 2) for v in steps],
            "canary_ms": canary_ms(canary, started, time.monotonic()) if canary else None}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--processes", type=int, default=12)
    p.add_argument("--cpus", default="4-7")
    p.add_argument("--arms", default="free,pinned", help=f"comma-separated, taken in turn: {', '.join(ARMS)}")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    p.add_argument("--spec", choices=sorted(SPECS), default="large-fp16")
    p.add_argument("--canary", action="store_true", help="time a pure-Python loop beside every run")
    args = p.parse_args(argv)
    global SPEC
    SPEC = SPECS[args.spec]
    PinnedLaunch.cpus = args.cpus
    NOGC.mkdir(parents=True, exist_ok=True)
    (NOGC / "sitecustomize.py").write_text("import gc\ngc.disable()\n")
    args.out.mkdir(parents=True, exist_ok=True)
    arms = args.arms.split(",")
    runs = []
    canary = proc = None
    if args.canary:
        canary = args.out / f"canary-{args.spec}.txt"
        proc = subprocess.Popen([sys.executable, "-c", CANARY, str(canary)])
        time.sleep(3.0)
        idle = canary_ms(canary, 0.0, time.monotonic())
        print(f"canary alone: median chunk {idle or 0:.3f} ms", flush=True)
    try:
        for i in range(args.processes):
            runs.append(one(arms[i % len(arms)], args.out, i, canary))
            r = runs[-1]
            print(f"{r['arm']:<7}{i:>3} {r['status']:<4} median {r['median_ms'] or 0:7.2f} min {r['min_ms'] or 0:7.2f} "
                  f"host {r['host_median_ms'] or 0:7.2f} ms  SM {r['sm_clock_median_mhz'] or 0:6.0f} MHz  "
                  f"steal {r['steal_share']:.2%}  canary {r['canary_ms'] or 0:.3f} ms  {r['seconds']} s", flush=True)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
    (args.out / f"spread_runs_{args.spec}.json").write_text(
        json.dumps({"spec": SPEC.to_dict(), "cpus": args.cpus, "runs": runs}, indent=1))
    for arm in arms:
        m = [r["median_ms"] for r in runs if r["arm"] == arm and r["median_ms"]]
        if len(m) >= 2:
            print(f"{arm}: {len(m)} processes, medians {min(m):.2f}-{max(m):.2f} ms, median {statistics.median(m):.2f}, "
                  f"CV {statistics.stdev(m) / statistics.fmean(m):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the spread between processes of one host-bound spec comes from (docs/results/nsys_headline_h100.md).

Plain runs of the same spec (`large`, fp16 train, ctx 512, batch 4: eager and host-bound on an H100), each a
fresh worker as `perfconsole run` starts it, alternating arms: free (as perfconsole starts it), pinned
(`taskset -c CPUS`, the worker and all its threads on a few fixed CPUs) and fixed (`setarch -R`, no address
space randomisation, and PYTHONHASHSEED=0: every process laid out alike). For each process: its median and
minimum step, the host's median issue time per step, the median SM clock over its measured steps (NVML, as
every run records it), and the CPU time the hypervisor took from this machine meanwhile (steal, /proc/stat).

    python docs/results/probes/spread_probe.py --processes 12 --arms free,pinned --cpus 4-7 --out DIR   (GPU machine)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.spec import RunSpec

SPEC = RunSpec(size="large", ctx=512, batch=4, precision="fp16", mode="train", device="cuda", warmup=3, steps=10)


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


ARMS = {"free": (Launch, {}), "pinned": (PinnedLaunch, {}), "fixed": (FixedLaunch, {"PYTHONHASHSEED": "0"})}


def steal_jiffies() -> tuple[int, int]:
    """(steal, all) jiffies of the machine so far, from /proc/stat's cpu line."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[7], sum(fields)


def one(arm: str, out: Path, index: int) -> dict:
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
            "steal_share": (steal1 - steal0) / max(1, all1 - all0), "steps_ms": [round(v, 2) for v in steps]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--processes", type=int, default=12)
    p.add_argument("--cpus", default="4-7")
    p.add_argument("--arms", default="free,pinned", help=f"comma-separated, taken in turn: {', '.join(ARMS)}")
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = p.parse_args(argv)
    PinnedLaunch.cpus = args.cpus
    args.out.mkdir(parents=True, exist_ok=True)
    arms = args.arms.split(",")
    runs = []
    for i in range(args.processes):
        runs.append(one(arms[i % len(arms)], args.out, i))
        r = runs[-1]
        print(f"{r['arm']:<7}{i:>3} {r['status']:<4} median {r['median_ms'] or 0:7.2f} min {r['min_ms'] or 0:7.2f} "
              f"host {r['host_median_ms'] or 0:7.2f} ms  SM {r['sm_clock_median_mhz'] or 0:6.0f} MHz  "
              f"steal {r['steal_share']:.2%}  {r['seconds']} s", flush=True)
    (args.out / "spread_runs.json").write_text(json.dumps({"spec": SPEC.to_dict(), "cpus": args.cpus, "runs": runs},
                                                          indent=1))
    for arm in arms:
        m = [r["median_ms"] for r in runs if r["arm"] == arm and r["median_ms"]]
        if len(m) >= 2:
            print(f"{arm}: {len(m)} processes, medians {min(m):.2f}-{max(m):.2f} ms, median {statistics.median(m):.2f}, "
                  f"CV {statistics.stdev(m) / statistics.fmean(m):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

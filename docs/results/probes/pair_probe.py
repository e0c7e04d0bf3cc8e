"""Is the spread between processes the machine's, at the moment, or each process's own? (process_spread_2xh200.md)

Two ways, on a two-GPU machine, of one host-bound spec (spread_probe.py's SPECS):
- one at a time on GPU 0, with three canaries beside them, each a process of its own timing fixed chunks of work:
  `python` (a pure-Python loop), `torch` (torch's CPU dispatcher: many small in-place adds, one thread) and
  `memory` (gathers at random rows of a 512 MiB tensor, one thread). A canary that slows when the runs slow names
  what the runs lack on a slow stretch (the dispatcher's code and data in the caches, or memory bandwidth);
- pairs side by side, one process on each GPU, started together: if the slowness is the machine's at that moment
  (a neighbour on the host), both of a pair feel it and their ratio stays near 1 while pairs differ; if it is each
  process's own, the ratio spreads as much as single processes do.

    python docs/results/probes/pair_probe.py --spec small-bf16 --processes 8 --pairs 4 --out DIR   (two GPUs)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from spread_probe import SPECS, canary_ms

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord

CANARIES = {
    "python": """
x = 0
for i in range(100000):
    x += i * i
""",
    "torch": """
for _ in range(2000):
    t.add_(1.0)
""",
    "memory": """
big.index_select(0, rows).sum()
""",
}
LOOP = """
import sys, time
import torch
torch.set_num_threads(1)
t = torch.zeros(16)
big = torch.zeros(1 << 17, 1024)  # 512 MiB of float32
rows = torch.randint(0, 1 << 17, (4096,))
out = open(sys.argv[1], "w", buffering=1)
body = compile(sys.argv[2], "canary", "exec")
while True:
    t0 = time.monotonic()
    exec(body)
    t1 = time.monotonic()
    out.write(f"{t1:.4f} {1000 * (t1 - t0):.3f}\\n")
"""


def run(spec, out: Path, gpu: int) -> tuple[float | None, float, float]:
    """(median step ms, start, end) of one plain run on `gpu`."""
    launch = Launch(spec, out_dir=out, env={"CUDA_VISIBLE_DEVICES": str(gpu)})
    record = RunRecord(spec)
    start = time.monotonic()
    for event in launch.events():
        record.apply(event)
    steps = [s.total_ms for s in record.steps]
    return (statistics.median(steps) if steps else None), start, time.monotonic()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", choices=sorted(SPECS), default="small-bf16")
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = p.parse_args(argv)
    spec = SPECS[args.spec]
    args.out.mkdir(parents=True, exist_ok=True)
    files = {name: args.out / f"canary-{name}.txt" for name in CANARIES}
    procs = [subprocess.Popen([sys.executable, "-c", LOOP, str(files[name]), body]) for name, body in CANARIES.items()]
    result: dict = {"spec": spec.to_dict(), "one_at_a_time": [], "pairs": []}
    try:
        deadline = time.monotonic() + 90  # each canary imports torch first
        while time.monotonic() < deadline and not all(f.exists() and len(f.read_text().splitlines()) >= 20
                                                      for f in files.values()):
            time.sleep(0.5)
        alone = {name: canary_ms(f, 0.0, time.monotonic()) for name, f in files.items()}
        result["canaries_alone_ms"] = alone
        print("canaries alone: " + ", ".join(f"{n} {v or 0:.3f} ms" for n, v in alone.items()), flush=True)
        for i in range(args.processes):
            median, start, end = run(spec, args.out / f"one-{i}", 0)
            c = {name: canary_ms(f, start, end) for name, f in files.items()}
            result["one_at_a_time"].append({"median_ms": median, "canary_ms": c})
            print(f"one {i}: median {median or 0:.2f} ms  " + "  ".join(f"{n} {v or 0:.3f}" for n, v in c.items()),
                  flush=True)
        for i in range(args.pairs):
            got: dict[int, tuple] = {}

            def one(gpu: int, got=got, i=i) -> None:
                got[gpu] = run(spec, args.out / f"pair-{i}-{gpu}", gpu)

            threads = [threading.Thread(target=one, args=(g,)) for g in (0, 1)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            a, b = got[0][0], got[1][0]
            result["pairs"].append({"gpu0_ms": a, "gpu1_ms": b})
            print(f"pair {i}: GPU 0 {a or 0:.2f} ms, GPU 1 {b or 0:.2f} ms, ratio {(a or 0) / (b or 1):.3f}", flush=True)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    (args.out / f"pair_probe_{args.spec}.json").write_text(json.dumps(result, indent=1))
    ones = [r["median_ms"] for r in result["one_at_a_time"] if r["median_ms"]]
    if len(ones) >= 3:
        print(f"one at a time: {min(ones):.2f}-{max(ones):.2f} ms ({max(ones) / min(ones) - 1:.1%} apart)")
        for name in CANARIES:
            c = [r["canary_ms"][name] for r in result["one_at_a_time"] if r["median_ms"]]
            if all(c):
                print(f"  canary {name}: {min(c):.3f}-{max(c):.3f} ms, correlation with the runs "
                      f"{statistics.correlation(ones, c):+.2f}")
    ratios = [r["gpu0_ms"] / r["gpu1_ms"] for r in result["pairs"] if r["gpu0_ms"] and r["gpu1_ms"]]
    if ratios:
        pairs = [v for r in result["pairs"] for v in (r["gpu0_ms"], r["gpu1_ms"]) if v]
        print(f"pairs: processes {min(pairs):.2f}-{max(pairs):.2f} ms ({max(pairs) / min(pairs) - 1:.1%} apart), "
              f"ratio GPU 0 / GPU 1 {min(ratios):.3f}-{max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

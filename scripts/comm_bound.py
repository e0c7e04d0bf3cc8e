"""What bounds a data-parallel step, from each rank's torch profiler trace (`--profile torch`): per step and rank,
the GPU's time split into compute alone, compute under communication, communication alone and idle, and when the
backward's last gradients were ready against when their all-reduce ended.

    python3 scripts/comm_bound.py RANK0/torch_trace.json RANK1/torch_trace.json ... [--json OUT.json]

A kernel is communication when perfconsole's categories say so (NCCL's kernels). A step runs from one `forward`
range's start on the GPU (the `gpu_user_annotation` twin of the phase range) to the next one's; the last step ends
at its last kernel. Times in ms; medians over the steps of each rank.
"""
from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path

from perfconsole.core.profiling.categories import categorize
from perfconsole.core.profiling.overlap import intersection_length, length, merge


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def _clip(intervals: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in intervals if b > lo and a < hi]


def steps_of(path: Path) -> list[dict[str, float]]:
    ev = _events(path)
    kernels = [(e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3, e["name"]) for e in ev
               if e.get("cat") == "kernel" and "dur" in e]
    comm = [(a, b) for a, b, n in kernels if categorize(n) == "communication"]
    comp = [(a, b) for a, b, n in kernels if categorize(n) != "communication"]
    phases: dict[str, list[tuple[float, float]]] = {}
    for e in ev:
        if e.get("cat") == "gpu_user_annotation" and e.get("name") in ("forward", "backward", "optimizer_step"):
            phases.setdefault(e["name"], []).append((e["ts"] / 1e3, (e["ts"] + e["dur"]) / 1e3))
    starts = sorted(a for a, _ in phases.get("forward", []))
    if not starts or not kernels:
        return []
    ends = starts[1:] + [max(b for _, b, _ in kernels)]
    out = []
    for lo, hi in zip(starts, ends):
        c, m = _clip(comp, lo, hi), _clip(comm, lo, hi)
        busy = length(c + m)
        both = intersection_length(c, m)
        bwd = [(a, b) for a, b in phases.get("backward", []) if lo <= a < hi]
        opt = [(a, b) for a, b in phases.get("optimizer_step", []) if lo <= a < hi]
        row = {"step_ms": hi - lo, "compute_alone_ms": length(c) - both, "compute_under_comm_ms": both,
               "comm_alone_ms": length(m) - both, "idle_ms": (hi - lo) - busy, "comm_union_ms": length(m),
               "comm_kernel_sum_ms": sum(b - a for a, b in m), "compute_kernel_sum_ms": sum(b - a for a, b in c)}
        if bwd:
            b_lo, b_hi = bwd[0]
            last_compute = max((b for a, b in merge(_clip(comp, b_lo, hi)) if a < b_hi), default=b_hi)
            row["backward_ms"] = b_hi - b_lo
            row["comm_after_backward_compute_ms"] = length(_clip(m, last_compute, hi))
            row["comm_in_backward_ms"] = length(_clip(m, b_lo, last_compute))
        if opt:
            row["optimizer_ms"] = opt[0][1] - opt[0][0]
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    report = {}
    for path in a.traces:
        steps = steps_of(path)
        if not steps:
            print(f"{path}: no forward ranges or kernels", file=sys.stderr)
            continue
        keys = sorted({k for s in steps for k in s})
        report[str(path)] = {"steps": len(steps), **{k: round(statistics.median(s[k] for s in steps if k in s), 3)
                                                     for k in keys}}
    if not report:
        return 1
    keys = sorted({k for r in report.values() for k in r})
    print("| trace | " + " | ".join(keys) + " |")
    print("| --- |" + " --: |" * len(keys))
    for path, r in report.items():
        print(f"| {path} | " + " | ".join(str(r.get(k, "-")) for k in keys) + " |")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

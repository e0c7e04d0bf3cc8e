"""A step in flight against a synchronised step, each beside an independent timing of the same step.

    python3 docs/results/probes/step_in_flight.py OUT.md [--size 2.7B] [--size xl] ...

For each size (bf16, train, ctx 512, batch 4, eager): `perfconsole run` as it measures by default (the
next step queued while the GPU finishes the last) and with `--step-sync`, then
scripts/independent_timing.py (its own loop: an event pair per synchronised step, and the mean of the
same steps back to back). Each is its own process. The table gives medians per phase in ms.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COMMON = ["--ctx", "512", "--batch", "4", "--precision", "bf16", "--mode", "train"]


def ours(size: str, sync: bool, out: Path) -> dict:
    cmd = [sys.executable, "-m", "perfconsole.tui.main", "run", "--size", size, *COMMON, "--warmup", "5",
           "--steps", "20", "--device", "cuda", "--force", "--save", str(out)] + (["--step-sync"] if sync else [])
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    data = json.loads(out.read_text())["data"]
    med = {k: statistics.median(s[k] for s in data["steps"])
           for k in ("total_ms", "forward_ms", "backward_ms", "optimizer_ms")}
    mean = statistics.fmean(s["total_ms"] for s in data["steps"])
    return {"median": med, "mean_total_ms": mean, "gpu": data["environment"].get("gpu_name"),
            "command": "perfconsole " + " ".join(cmd[3:-2] + (["--step-sync"] if sync else []))}


def independent(size: str) -> dict:
    cmd = [sys.executable, str(ROOT / "scripts" / "independent_timing.py"), "--size", size, *COMMON,
           "--warmup", "5", "--steps", "20"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", action="append", default=None)
    a = ap.parse_args()
    sizes = a.size or ["2.7B"]
    lines = ["# A step in flight against a synchronised step (bf16, train, ctx 512, batch 4, eager)", "",
             f"Command: `python3 docs/results/probes/step_in_flight.py {a.out} "
             + " ".join(f"--size {s}" for s in sizes) + "`",
             "", "| size | timing | median step (ms) | mean step (ms) | forward (ms) | backward (ms) | optimizer (ms) |",
             "| --- | --- | --: | --: | --: | --: | --: |"]
    doc = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            flight = ours(size, False, Path(tmp) / f"{size}-flight.json")
            synced = ours(size, True, Path(tmp) / f"{size}-sync.json")
            ind = independent(size)
            doc.append({"size": size, "in_flight": flight, "step_sync": synced, "independent": ind})
            for name, r in (("perfconsole, step in flight (default)", flight), ("perfconsole --step-sync", synced)):
                m = r["median"]
                lines.append(f"| {size} | {name} | {m['total_ms']:.2f} | {r['mean_total_ms']:.2f} | "
                             f"{m['forward_ms']:.2f} | {m['backward_ms']:.2f} | {m['optimizer_ms']:.2f} |")
            lines.append(f"| {size} | independent, synchronised steps (event pair) | {ind['event_median_ms']:.2f} | "
                         f"{statistics.fmean(ind['event_ms']):.2f} | - | - | - |")
            lines.append(f"| {size} | independent, steps back to back | - | {ind['back_to_back_mean_ms']:.2f} | - | - | - |")
    lines += ["", "Each row is its own process. In flight, the mean step is to be held against the back-to-back "
              "mean; synchronised, the median against the event pair's median.", "",
              f"Device: {doc[0]['in_flight']['gpu']}."]
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(a.out).with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

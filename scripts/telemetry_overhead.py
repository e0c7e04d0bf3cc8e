"""What recording GPU telemetry costs: the same run with the NVML sampler on and off, alternated.

    python3 scripts/telemetry_overhead.py OUT.md [--size xl] [--pairs 2]

Each run is its own process (python -m perfconsole.tui.main run ...); PERFCONSOLE_TELEMETRY=0 turns
the sampler off. The table gives each run's median step time and the ratio of the medians of the
"on" runs to the "off" runs. A host-bound size (xl bf16 eager) is the sensitive case: the sampler's
thread competes with the kernel launches for the host.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def one(size: str, telemetry: bool, out: Path) -> dict:
    cmd = [sys.executable, "-m", "perfconsole.tui.main", "run", "--size", size, "--ctx", "512", "--batch", "4",
           "--precision", "bf16", "--mode", "train", "--warmup", "3", "--steps", "15", "--device", "cuda",
           "--save", str(out)]
    env = {**os.environ, "PERFCONSOLE_TELEMETRY": "1" if telemetry else "0"}
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    data = json.loads(out.read_text())["data"]
    return {"telemetry": telemetry, "median_ms": statistics.median(s["total_ms"] for s in data["steps"]),
            "samples": (data.get("telemetry") or {}).get("samples"), "command": " ".join(cmd[3:])}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", default="xl")
    ap.add_argument("--pairs", type=int, default=2)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.pairs):
            for on in (True, False) if i % 2 == 0 else (False, True):
                rows.append(one(a.size, on, Path(tmp) / f"r{len(rows)}.json"))
    on = statistics.median(r["median_ms"] for r in rows if r["telemetry"])
    off = statistics.median(r["median_ms"] for r in rows if not r["telemetry"])
    lines = [f"# Telemetry sampling overhead ({a.size}, ctx 512, batch 4, bf16, train)", "",
             f"Command: `python3 scripts/telemetry_overhead.py {a.out} --size {a.size} --pairs {a.pairs}`", "",
             "| run | telemetry | median step (ms) | samples |", "| --: | --- | --: | --: |"]
    lines += [f"| {i + 1} | {'on' if r['telemetry'] else 'off'} | {r['median_ms']:.3f} | {r['samples'] or '-'} |"
              for i, r in enumerate(rows)]
    lines += ["", f"Median of the runs' medians: on {on:.3f} ms, off {off:.3f} ms, ratio {on / off:.4f} "
              f"({(on / off - 1):+.2%}). Each run is a separate process, so process-to-process spread is "
              "in this figure too.", "", f"Each run: `perfconsole {rows[0]['command']}`"]
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

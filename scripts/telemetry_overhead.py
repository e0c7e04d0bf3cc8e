"""What recording GPU telemetry costs a run, measured inside one process's steps.

    python3 scripts/telemetry_overhead.py OUT.md [--size xl] [--size 2.7B] [--steps 80] [--block 5]

The sampler runs in the parent (the console or CLI process), as it does in every run
(core/launch/telemetry.py). Comparing separate processes with it on and off cannot show a 1% cost:
host-bound steps differ by more than that from process to process. So one child measures `--steps`
steps with the launch's own sampler off (PERFCONSOLE_TELEMETRY=0), and this script turns a
TelemetryRecorder (the same one, same 10 Hz) on and off every `--block` steps as their events arrive.
Steps measured while it sampled are held against steps measured while it did not, in the same process.
A step is counted "on" when the sampler ran for the whole of the step before it arrived.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.settings import RunSpec
from perfconsole.core.telemetry.recorder import TelemetryRecorder


def one(size: str, steps: int, block: int) -> dict:
    spec = RunSpec(size=size, ctx=512, batch=4, precision="bf16", mode="train", warmup=5, steps=steps, device="cuda")
    launch = Launch(spec, env={"PERFCONSOLE_TELEMETRY": "0"})
    on_ms: list[float] = []
    off_ms: list[float] = []
    recorder: TelemetryRecorder | None = None
    samples = 0
    measured = 0
    gpu = None
    for event in launch.events():
        if isinstance(event, ev.RunStarted):
            gpu = event.environment.get("gpu_name")
        if isinstance(event, ev.Step) and not event.warmup:
            # Steps arrive one behind the GPU; the first of each block is dropped as a transition.
            sampling = recorder is not None
            position = measured % block
            if position:
                (on_ms if sampling else off_ms).append(event.total_ms)
            measured += 1
            if measured % block == 0:
                if recorder is None:
                    recorder = TelemetryRecorder(0)
                    recorder.start()
                else:
                    got = recorder.stop()
                    samples += got.samples if got is not None else 0
                    recorder = None
        if isinstance(event, ev.Finished):
            if event.status != "ok":
                raise SystemExit(f"{size}: the run ended {event.status}")
    if recorder is not None:
        recorder.stop()
    on, off = statistics.median(on_ms), statistics.median(off_ms)
    return {"size": size, "gpu": gpu, "steps_on": len(on_ms), "steps_off": len(off_ms), "median_on_ms": on,
            "median_off_ms": off, "ratio": on / off, "mean_on_ms": statistics.fmean(on_ms),
            "mean_off_ms": statistics.fmean(off_ms), "samples": samples}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", action="append", default=None)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--block", type=int, default=5)
    a = ap.parse_args()
    rows = [one(size, a.steps, a.block) for size in (a.size or ["xl"])]
    sizes = " ".join(f"--size {s}" for s in (a.size or ["xl"]))
    lines = ["# Telemetry sampling overhead, inside one process (bf16, train, ctx 512, batch 4)", "",
             f"Command: `python3 scripts/telemetry_overhead.py {a.out} {sizes} --steps {a.steps} --block {a.block}`", "",
             "| size | steps sampled / not | median step, sampled (ms) | median step, not (ms) | ratio | "
             "mean ratio | NVML samples |", "| --- | --: | --: | --: | --: | --: | --: |"]
    lines += [f"| {r['size']} | {r['steps_on']} / {r['steps_off']} | {r['median_on_ms']:.3f} | {r['median_off_ms']:.3f} | "
              f"{r['ratio']:.4f} | {r['mean_on_ms'] / r['mean_off_ms']:.4f} | {r['samples']} |" for r in rows]
    lines += ["", "The parent's 10 Hz NVML sampler is switched on and off every "
              f"{a.block} steps of one child process; the first step of each block is left out.", "",
              f"Device: {rows[0]['gpu']}."]
    Path(a.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(a.out).with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

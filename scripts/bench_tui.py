"""Console figures: time to first frame, and the UI process's CPU while a run streams.

    python scripts/bench_tui.py [--repeats 5] [--seconds 15] [--slow-ms 80]

First frame: a fresh interpreter imports the console and draws its first frame headless (80x24);
the figure is wall time from spawning it to that frame (interpreter start included), median of N.

UI CPU: the console runs headless in this process while the real worker streams the tiny model on
CPU, slowed with PERFCONSOLE_FAULT=slow:MS to about 10 steps/s, and NVML is sampled at 4 Hz. Where
no GPU exists the sampler returns a synthetic GpuSample so the GPU panel redraws at 4 Hz as on a GPU
box. CPU is this process's (all threads) user+system time over the window; the worker's CPU is in
another process and not counted.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

FIRST_FRAME_CHILD = r"""
from perfconsole.tui.app import PerfConsole
class Probe(PerfConsole):
    def _first_frame(self):
        super()._first_frame()
        import os; os.write(1, b"first-frame\n")  # Textual captures print()
        self.exit(0)
Probe(sampler=lambda i: None).run(headless=True, size=(80, 24))
"""


def first_frame_s() -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", FIRST_FRAME_CHILD], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PERFCONSOLE_DATA_DIR": os.environ.get("PERFCONSOLE_DATA_DIR",
                                                                                        "/tmp/perfconsole-bench")})
    assert proc.stdout is not None
    for line in proc.stdout:
        if "first-frame" in line:
            t1 = time.perf_counter()
            break
    else:
        raise RuntimeError("the console never drew a frame")
    proc.wait(timeout=30)
    return t1 - t0


def gpu_sampler():
    from perfconsole.core.telemetry import nvml
    from perfconsole.core.telemetry.nvml import GpuSample

    if nvml.gpu_count() > 0:
        return nvml.sample, "NVML"
    n = [0]

    def synthetic(index: int):
        n[0] += 1
        return GpuSample(index, "synthetic", time.monotonic(), float(n[0] % 100), 1000.0 + n[0], 81920.0,
                         300.0, 60.0, 1980.0)
    return synthetic, "synthetic samples (no GPU here)"


async def ui_cpu(seconds: float, slow_ms: int) -> tuple[float, float, str]:
    from perfconsole.core.settings import RunSpec
    from perfconsole.tui.app import PerfConsole

    sampler, kind = gpu_sampler()
    spec = RunSpec(size="tiny", ctx=32, batch=1, device="cpu", mode="fwd", warmup=1, steps=100_000)
    app = PerfConsole(spec, sampler=sampler, launch_env={"PERFCONSOLE_FAULT": f"slow:{slow_ms}"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        while app.active is None or len(app.active.steps) < 5:  # model built, steps flowing
            await pilot.pause(0.1)
        steps0, cpu0, t0 = len(app.active.steps), time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        steps1, cpu1, t1 = len(app.active.steps), time.process_time(), time.perf_counter()
        app.action_cancel_run()
        while app.active is not None:
            await pilot.pause(0.1)
    return (cpu1 - cpu0) / (t1 - t0) * 100, (steps1 - steps0) / (t1 - t0), kind


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--slow-ms", type=int, default=80, help="sleep before each step, to pace ~10 steps/s")
    args = ap.parse_args()
    frames = [first_frame_s() for _ in range(args.repeats)]
    cpu, rate, kind = asyncio.run(ui_cpu(args.seconds, args.slow_ms))
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    print()
    print("| figure | value | target |")
    print("| --- | --: | --: |")
    print(f"| time to first frame (median of {args.repeats}, min-max {min(frames):.2f}-{max(frames):.2f} s) "
          f"| {statistics.median(frames):.2f} s | < 1 s |")
    print(f"| UI process CPU while streaming {rate:.1f} steps/s, GPU panel at 4 Hz ({kind}) "
          f"| {cpu:.1f}% of a core | < 15% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

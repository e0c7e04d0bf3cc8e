"""Is a fresh machine slow where memory is touched for the first time?

`rate`: one fresh process maps GIB GiB of anonymous memory, writes one byte a page and prints how long that took
(the first touch of every page: the guest's page fault, and on a fresh virtual machine the host's too).
`pretouch`: PROCS processes together touch FRACTION of the memory the kernel says is available, then exit,
so that every page the guest hands out afterwards has been touched once.

    python docs/results/probes/first_touch_probe.py rate --gib 2
    python docs/results/probes/first_touch_probe.py pretouch --fraction 0.9 --procs 16
"""
from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import time

PAGE = mmap.PAGESIZE


def touch(gib: float) -> float:
    """Seconds to write one byte in every page of a fresh mapping of `gib` GiB."""
    size = int(gib * (1 << 30))
    m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    view = memoryview(m)
    t = time.perf_counter()
    for off in range(0, size, PAGE):
        view[off] = 1
    took = time.perf_counter() - t
    view.release()
    m.close()
    return took


def available_gib() -> float:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / (1 << 20)
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("rate", "pretouch"))
    p.add_argument("--gib", type=float, default=2.0)
    p.add_argument("--fraction", type=float, default=0.9)
    p.add_argument("--procs", type=int, default=16)
    a = p.parse_args()
    if a.what == "rate":
        took = touch(a.gib)
        pages = a.gib * (1 << 30) / PAGE
        print(f"first touch of {a.gib:g} GiB: {took:.3f} s, {took / pages * 1e6:.3f} us a page, "
              f"{a.gib / took:.2f} GiB/s", flush=True)
        return
    total = available_gib() * a.fraction
    t = time.perf_counter()
    with mp.get_context("fork").Pool(a.procs) as pool:
        times = pool.map(touch, [total / a.procs] * a.procs)
    print(f"pretouch: {total:.1f} GiB in {a.procs} processes, {time.perf_counter() - t:.1f} s "
          f"(slowest process {max(times):.1f} s)", flush=True)


if __name__ == "__main__":
    main()

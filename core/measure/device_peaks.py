"""Measure the device's peaks for speed of light: dense matmul TFLOP/s per precision and copy GB/s.

Never inside the timed steps, and cached by device name, driver and torch version (core.flops), so a device
is measured once. Each figure is the fastest of several timed repetitions after warm-up (a peak is what the
device can reach; a shared CPU's slow repetitions are its neighbours'): CUDA events on a GPU, perf_counter
on the CPU (where the CPU's own matmul and memcpy peaks are the ones a CPU run can reach; one thread's,
times the run's threads: see `measure`).

Where a run measures them (`for_run`, called by core.measure.bench):
- On a GPU, before the model is built: nothing else holds the device's memory or its clocks, and the 2 GiB
  the copy needs cannot be missing because the model took it. One large size reaches the peak in about a
  second, once per device and driver. Measured after the steps instead, they would meet a device warmed by
  the run (lower clocks: floors too high) and a caching allocator still holding the model's blocks.
- On the CPU, after the last timed step, where the summary needs them, and only the figures it needs:
  the run's own precision and the copy (about a quarter of a second on a 2-core machine). Nothing on a CPU
  is held by the model that the measurement needs, and in front of the first step they cost a first run
  a second or more. A CPU's half-precision matmuls can be a hundred times slower than its fp32 ones, so
  there the matmul grows from a small size only while the next size stays cheap, and the best rate seen is
  the peak. Figures measured later for another precision join the cache entry.
The record's `peaks` says which: `source` measured, cached, or `not measured` with its `reason`.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from perfconsole.core import events as ev
from perfconsole.core.flops import (PEAK_KEYS, PEAKS_FILE, Peaks, beaten_text, cache_key, cached_peaks, forget_peaks,
                                    peak_key, save_peaks)
from perfconsole.core.paths import data_dir
from perfconsole.core.settings import RunSpec

# (n for the square matmul, bytes copied): large enough to reach the peak, small enough to take ~1 s.
CUDA_SIZES = (8192, 1 << 30)
CUDA_REPEATS = 7
# The CPU's matmul sizes, tried in order while the next is predicted (8x the last call) to take at most
# CPU_CALL_MS a call; the copy is twice the size of a server's last-level cache, so it measures memory.
# One thread's best is reached by 512 (on the 2-core machine, three rounds: 1024 gave 70-79 GFLOP/s against
# 71-94 for 128-512, and took 125 ms a figure, half the measurement): a call of 512 stops the climb there.
CPU_MATMUL_SIZES = (128, 256, 512, 1024)
CPU_CALL_MS = 10.0
CPU_COPY_BYTES = 64 << 20
CPU_REPEATS = 3
CPU_MAX_REPEATS = 200
CPU_BUDGET_MS = 30.0  # per figure: calls are repeated this long, the fastest kept
NOT_MEASURED = "not measured"  # a record's peaks `source` where the run measured none
MEASURING = "measuring this device's peaks once (matmul, copy) ..."


def device_key(device: torch.device) -> str:
    if device.type == "cuda":
        driver = None
        try:
            import pynvml  # nvidia-ml-py: the driver version, which CUDA's API does not give

            pynvml.nvmlInit()
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else driver
        except Exception:  # no NVML: the CUDA runtime's version still separates most set-ups
            driver = f"cuda {torch.version.cuda}"
        return cache_key(torch.cuda.get_device_name(device), driver, torch.__version__)
    import platform

    return cache_key(f"cpu {platform.processor() or platform.machine()} x{torch.get_num_threads()}", None,
                     torch.__version__)


def _time_ms(fn: Callable[[], object], device: torch.device) -> float:
    """The fastest ms of `fn` after warm-up calls: over CUDA_REPEATS on a GPU; on the CPU over as many
    calls as fit in CPU_BUDGET_MS (at least CPU_REPEATS, at most CPU_MAX_REPEATS). A busy CPU deschedules
    one of a matmul's threads at times, and the others wait at its barrier: a few calls can all be
    hundreds of times slow, while among many the fastest is the device's own."""
    cuda = device.type == "cuda"
    for _ in range(2 if cuda else 1):
        fn()
    times: list[float] = []
    if cuda:
        for _ in range(CUDA_REPEATS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return min(times)
    begun = time.perf_counter()
    while len(times) < CPU_MAX_REPEATS and (len(times) < CPU_REPEATS
                                            or (time.perf_counter() - begun) * 1e3 < CPU_BUDGET_MS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


def _matmul_tflops(device: torch.device, dtype: torch.dtype) -> float:
    """The best dense matmul TFLOP/s over the device's sizes: one large size on a GPU; on the CPU sizes
    that grow while the next call is predicted to stay under CPU_CALL_MS."""
    best = 0.0
    for n in (CUDA_SIZES[0],) if device.type == "cuda" else CPU_MATMUL_SIZES:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        out = torch.empty(n, n, device=device, dtype=dtype)
        ms = _time_ms(partial(torch.mm, a, b, out=out), device)
        best = max(best, 2.0 * n**3 / (ms * 1e9))
        del a, b, out
        if ms * 8 > CPU_CALL_MS:  # doubling n costs 8x the time
            break
    return best


def measure(device: torch.device, keys: tuple[str, ...] = PEAK_KEYS, copy: bool = True) -> Peaks:
    """The matmul figures `keys` names (precision keys: core.flops.PEAK_KEYS) and, with `copy`, the copy's.

    On a GPU, the device's rates. On the CPU, one thread's best rates times the threads a run uses
    (torch.get_num_threads()): a busy CPU deschedules one of a parallel matmul's threads at times and the
    others wait at its barrier, so a parallel measurement can come out hundreds of times low (0.13 against
    170 GFLOP/s on a 2-core machine with three other torch processes), while one thread's fastest call is
    its own. The product bounds the run's rates from above (a copy rarely scales so far), so a CPU floor
    is never above what the device can do. A CPU has no TF32: its fp32 kernel is timed twice, as fp32 and as
    tf32, and both figures are the faster of the two (on a loaded 2-core machine they came out 0.24 and 0.33
    TFLOP/s, and a matmul beside them reached 0.30). A CPU's half-precision kernels may compute in fp32
    (SDPA's does, and beat the floor of a bf16 matmul, which ran 30x slower than fp32 on a 2-core CI
    machine), so there bf16 and fp16 are at least fp32's, which is timed for them too."""
    key = device_key(device)
    if device.type == "cpu":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        fp32 = ("fp32", "tf32") if {"fp32", "tf32"} & set(keys) else ()
        try:
            tflops, gbps = _measure(device, (*fp32, *(k for k in ("bf16", "fp16") if k in keys)), copy)
        finally:
            torch.set_num_threads(threads)
        if fp32:
            tflops["fp32"] = tflops["tf32"] = max(tflops["fp32"], tflops["tf32"])
        return Peaks(key, _cpu_floors({k: v * threads for k, v in tflops.items()}), gbps * threads, "measured")
    return Peaks(key, *_measure(device, keys, copy), "measured")


def _cpu_floors(tflops: dict[str, float]) -> dict[str, float]:
    """A CPU's half-precision figures, at least its fp32 one where that is known (see `measure`)."""
    fp32 = tflops.get("fp32", 0.0)
    return {k: max(v, fp32) if k in ("bf16", "fp16") else v for k, v in tflops.items()}


_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}


def _measure(device: torch.device, keys: tuple[str, ...], copy: bool) -> tuple[dict[str, float], float]:
    """(matmul TFLOP/s per precision key in `keys`, copy GB/s or 0.0 without `copy`) at the current thread count."""
    tflops: dict[str, float] = {}
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    try:
        for key in keys:
            tf32 = key == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.set_float32_matmul_precision("high" if tf32 else "highest")
            tflops[key] = _matmul_tflops(device, _DTYPES[key])
    finally:
        torch.backends.cuda.matmul.allow_tf32, precision = saved
        torch.set_float32_matmul_precision(precision)
    if not copy:
        return tflops, 0.0
    nbytes = CUDA_SIZES[1] if device.type == "cuda" else CPU_COPY_BYTES
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = _time_ms(partial(dst.copy_, src), device)
    gbps = 2.0 * nbytes / (ms * 1e6)  # every byte is read once and written once
    del src, dst
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return tflops, gbps


def peaks_for(device: torch.device, say: Callable[[str], None] = lambda line: None,
              keys: tuple[str, ...] = PEAK_KEYS) -> Peaks:
    """The cached peaks for this device when they hold every figure in `keys`, else the missing ones measured
    now (the copy too, where nothing was cached) and cached beside the others. `say` gets one line when they
    are measured, and one more when they cannot be cached (then every run measures them again)."""
    key = device_key(device)
    found = cached_peaks(key)
    have = found.matmul_tflops if found is not None else {}
    missing = tuple(k for k in keys if not have.get(k))
    if found is not None and not missing:
        return found
    cpu = device.type == "cpu"
    if cpu and {"bf16", "fp16"} & set(missing) and not have.get("fp32"):
        missing += ("fp32",)  # a CPU's half-precision figure is at least its fp32 one
    say(MEASURING)
    peaks = measure(device, missing, copy=found is None)
    if found is not None:  # the copy was cached: the record says so beside the matmul measured now
        merged = {**have, **peaks.matmul_tflops}
        peaks = Peaks(key, _cpu_floors(merged) if cpu else merged, found.bandwidth_gbps, "measured",
                      bandwidth_source="cached")
    path = data_dir() / PEAKS_FILE
    try:
        save_peaks(peaks)
    except OSError as exc:  # the run still has its peaks, only not kept for the next one
        say(f"cannot keep the peaks in {path} ({exc.strerror or exc}): every run will measure them again")
    return peaks


def for_run(spec: RunSpec, device: torch.device, emit: Callable[[ev.Event], None]) -> dict[str, Any] | None:
    """The peaks a run's speed of light is held against, emitted for its record (ev.Peaks): all of a GPU's
    (bench calls this before the model is built), or on the CPU the figures the run's precision needs (bench
    calls this after the last timed step); cached, else measured now. With both figures given
    (--peak-tflops, --peak-gbps) nothing is measured, and the record says so."""
    if spec.peak_tflops and spec.peak_gbps:
        emit(ev.Peaks({"source": NOT_MEASURED, "reason": "--peak-tflops and --peak-gbps were given"}))
        return None
    keys = PEAK_KEYS if device.type == "cuda" else (peak_key(spec),)
    # One line when they are measured (a second on a GPU) and one when they cannot be cached; none when cached.
    found = peaks_for(device, lambda line: emit(ev.Progress("peaks", line)), keys).to_dict()
    emit(ev.Peaks(found))
    return found


def refute_peaks(sol: dict | None, say: Callable[[str], None]) -> None:
    """A phase faster than its floor proves the peaks too low: `say` so, and drop cached ones so the next
    run on this device measures them again (most often they were measured while something else held the
    device). Peaks measured by this very run, or given on the command line, are only named: measuring
    again would give the same."""
    said = beaten_text(sol or {})
    if said is None or sol is None:
        return
    pk = sol["peaks"]
    if "cached" not in (pk["matmul_source"], pk["bandwidth_source"]):
        say(said)
        return
    dropped = pk["device"] is not None and forget_peaks(pk["device"])
    say(said + ("; dropped from the cache, the next run measures them again" if dropped else ""))

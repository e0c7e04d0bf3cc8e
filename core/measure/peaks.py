"""Measure the device's peaks for speed of light: dense matmul TFLOP/s per precision and copy GB/s.

Run in the worker before the model is built (so nothing else holds the device) and never inside the
timed steps; the result is cached by device name, driver and torch version (core.flops), so
a device is measured once. Each figure is the fastest of several timed repetitions after warm-up (a
peak is what the device can reach; a shared CPU's slow repetitions are its neighbours'): CUDA events
on a GPU, perf_counter on the CPU (where the CPU's own matmul and memcpy peaks are the ones a CPU run
can reach).
"""
from __future__ import annotations

import time
from collections.abc import Callable

import torch

from perfconsole.core.flops import Peaks, cache_key, cached_peaks, save_peaks

# (n for the square matmul, bytes copied): large enough to reach the peak, small enough to take ~1 s.
CUDA_SIZES = (8192, 1 << 30)
CPU_SIZES = (1024, 64 << 20)
REPEATS = 7


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
    """The fastest ms of `fn` over REPEATS, after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(REPEATS):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return min(times)


def measure(device: torch.device) -> Peaks:
    n, nbytes = CUDA_SIZES if device.type == "cuda" else CPU_SIZES
    tflops: dict[str, float] = {}
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    try:
        for key, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16), ("fp32", torch.float32),
                           ("tf32", torch.float32)):
            tf32 = key == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.set_float32_matmul_precision("high" if tf32 else "highest")
            a = torch.randn(n, n, device=device, dtype=dtype)
            b = torch.randn(n, n, device=device, dtype=dtype)
            out = torch.empty(n, n, device=device, dtype=dtype)
            ms = _time_ms(lambda: torch.mm(a, b, out=out), device)
            tflops[key] = 2.0 * n**3 / (ms * 1e9)
            del a, b, out
    finally:
        torch.backends.cuda.matmul.allow_tf32, precision = saved
        torch.set_float32_matmul_precision(precision)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = _time_ms(lambda: dst.copy_(src), device)
    gbps = 2.0 * nbytes / (ms * 1e6)  # every byte is read once and written once
    del src, dst
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return Peaks(device_key(device), tflops, gbps, "measured")


def peaks_for(device: torch.device) -> Peaks:
    """The cached peaks for this device, else measured now and cached."""
    key = device_key(device)
    found = cached_peaks(key)
    if found is not None:
        return found
    peaks = measure(device)
    try:
        save_peaks(peaks)
    except OSError:  # a read-only data directory: the run still has its peaks, only not cached
        pass
    return peaks

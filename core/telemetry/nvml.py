"""NVML access for the console process: device count and live samples, N/A where unsupported.

Every call degrades cleanly: no driver, no GPU or a field the GPU does not report gives None (shown
as N/A), never an exception. Sampling runs on the caller's thread; the console calls it off the UI
thread and reschedules only after a sample returns, so polls never overlap.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

_lock = threading.Lock()
_state: dict[str, Any] = {"init": None}


def _nvml():
    """The pynvml module, initialised once; None where NVML is unavailable."""
    with _lock:
        if _state["init"] is None:
            try:
                import pynvml

                pynvml.nvmlInit()
                _state["init"] = pynvml
            except Exception:  # no library, no driver, no GPU: all mean "no GPU"
                _state["init"] = False
        return _state["init"] or None


def gpu_count() -> int:
    nv = _nvml()
    if nv is None:
        return 0
    try:
        return int(nv.nvmlDeviceGetCount())
    except Exception:
        return 0


def visible_gpus(env: dict[str, str] | None = None) -> list[int]:
    """NVML indices of the GPUs CUDA_VISIBLE_DEVICES (in `env`, else this process's) lets CUDA use, in
    CUDA's order; every GPU when it is unset. NVML itself ignores the variable. Entries that are not
    indices (UUIDs, MIG names) are skipped; an empty value hides every GPU, as it does for CUDA."""
    import os

    text = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    n = gpu_count()
    if text is None:
        return list(range(n))
    out: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= n:
            break  # CUDA stops at the first invalid entry
        out.append(int(item))
    return out


@dataclass(frozen=True)
class GpuSample:
    index: int
    name: str
    time: float                       # time.monotonic() of the sample
    util_pct: float | None            # GPU utilisation, %
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    temp_c: float | None
    sm_clock_mhz: float | None


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception:
        return None


def device(index: int = 0) -> tuple[Any, Any] | None:
    """(initialised pynvml module, handle of GPU `index`), or None where there is no such GPU.

    Shared by the live samples here and the run recorder, so both see NVML through one init.
    """
    nv = _nvml()
    if nv is None or index >= gpu_count():
        return None
    h = _try(nv.nvmlDeviceGetHandleByIndex, index)
    return None if h is None else (nv, h)


def sample(index: int = 0) -> GpuSample | None:
    """One sample of GPU `index`, or None where there is no such GPU."""
    found = device(index)
    if found is None:
        return None
    nv, h = found
    name = _try(nv.nvmlDeviceGetName, h) or "GPU"
    name = name.decode() if isinstance(name, bytes) else name
    util = _try(nv.nvmlDeviceGetUtilizationRates, h)
    mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
    power = _try(nv.nvmlDeviceGetPowerUsage, h)
    temp = _try(nv.nvmlDeviceGetTemperature, h, 0)  # NVML_TEMPERATURE_GPU
    clock = _try(nv.nvmlDeviceGetClockInfo, h, 1)   # NVML_CLOCK_SM
    return GpuSample(
        index=index, name=name, time=time.monotonic(),
        util_pct=float(util.gpu) if util is not None else None,
        mem_used_mib=mem.used / 2**20 if mem is not None else None,
        mem_total_mib=mem.total / 2**20 if mem is not None else None,
        power_w=power / 1000 if power is not None else None,
        temp_c=float(temp) if temp is not None else None,
        sm_clock_mhz=float(clock) if clock is not None else None,
    )

"""GPU telemetry over a run's measured steps, sampled on a daemon thread from start() to stop().

A run whose clocks sag under a power cap or heat measures slower for reasons outside the code under
test; recording clocks, power, temperature and NVML's clock-event reasons alongside the timed loop
makes that visible in the run's record. Every NVML field degrades to None where the GPU does not
report it, and with no GPU or no NVML the recorder starts, stops and returns None.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from perfconsole.core.telemetry import nvml
from perfconsole.core.telemetry.gpu_summary import REASONS, Telemetry

Read = Callable[[], dict[str, Any] | None]

# NVML's bit for each reason. The values are NVML's ABI; they are looked up by name first so a
# pynvml that renames a constant again still decodes, and the literals cover one that lacks it.
_REASON_BITS = {
    "gpu_idle": ("GpuIdle", 0x1),
    "applications_clocks_setting": ("ApplicationsClocksSetting", 0x2),
    "sw_power_cap": ("SwPowerCap", 0x4),
    "hw_slowdown": ("HwSlowdown", 0x8),
    "sync_boost": ("SyncBoost", 0x10),
    "sw_thermal_slowdown": ("SwThermalSlowdown", 0x20),
    "hw_thermal_slowdown": ("HwThermalSlowdown", 0x40),
    "hw_power_brake_slowdown": ("HwPowerBrakeSlowdown", 0x80),
    "display_clock_setting": ("DisplayClockSetting", 0x100),
}
assert tuple(_REASON_BITS) == REASONS


def reason_bits(nv: Any = None) -> dict[str, int]:
    """Short reason name -> bitmask, from the pynvml module `nv` where it names the constant."""
    out = {}
    for name, (suffix, bit) in _REASON_BITS.items():
        value = getattr(nv, "nvmlClocksEventReason" + suffix, None)
        if value is None:
            value = getattr(nv, "nvmlClocksThrottleReason" + suffix, bit)
        out[name] = int(value)
    return out


def decode_reasons(mask: int, bits: dict[str, int] | None = None) -> list[str]:
    """The short names of the reasons set in an NVML clock-event bitmask, in NVML's bit order."""
    bits = bits or reason_bits()
    return [name for name, bit in bits.items() if mask & bit]


def _get(fn: Callable[..., Any], *args: Any) -> Any:
    # NotSupported, NoPermission, a GPU fallen off the bus: each means "no figure", never a crash.
    try:
        return fn(*args)
    except Exception:
        return None


def nvml_reader(nv: Any, handle: Any) -> Read:
    """A read() over pynvml module `nv` and device `handle`: one dict of this moment's figures."""
    bits = reason_bits(nv)
    clock_sm = getattr(nv, "NVML_CLOCK_SM", 1)
    clock_mem = getattr(nv, "NVML_CLOCK_MEM", 2)
    temp_gpu = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
    # Drivers before the rename only have the throttle call; remember which one answers.
    reason_calls = [getattr(nv, n) for n in ("nvmlDeviceGetCurrentClocksEventReasons",
                                             "nvmlDeviceGetCurrentClocksThrottleReasons") if hasattr(nv, n)]

    def reasons() -> list[str] | None:
        while reason_calls:
            mask = _get(reason_calls[0], handle)
            if mask is not None:
                return decode_reasons(int(mask), bits)
            if len(reason_calls) == 1:
                return None
            reason_calls.pop(0)
        return None

    def num(value: Any, scale: float = 1.0) -> float | None:
        return None if value is None else round(float(value) * scale, 3)

    def read() -> dict[str, Any]:
        util = _get(nv.nvmlDeviceGetUtilizationRates, handle)
        mem = _get(nv.nvmlDeviceGetMemoryInfo, handle)
        return {
            "sm_clock_mhz": num(_get(nv.nvmlDeviceGetClockInfo, handle, clock_sm)),
            "mem_clock_mhz": num(_get(nv.nvmlDeviceGetClockInfo, handle, clock_mem)),
            "power_w": num(_get(nv.nvmlDeviceGetPowerUsage, handle), 1e-3),           # mW
            "power_limit_w": num(_get(nv.nvmlDeviceGetEnforcedPowerLimit, handle), 1e-3),
            "temperature_c": num(_get(nv.nvmlDeviceGetTemperature, handle, temp_gpu)),
            "gpu_util_pct": num(getattr(util, "gpu", None)),
            "mem_util_pct": num(getattr(util, "memory", None)),
            "memory_used_mib": num(getattr(mem, "used", None), 1 / 2**20),
            "reasons": reasons(),
        }

    return read


class TelemetryRecorder:
    """Samples one GPU every `period_s` on a daemon thread between start() and stop().

    `read` replaces the NVML read (a callable returning the FIELDS and `reasons`, or None to skip a
    moment); by default it reads GPU `index` through NVML. Samples never overlap: the thread reads,
    then waits `period_s`, so a slow read stretches the gap rather than stacking reads.
    """

    def __init__(self, index: int = 0, period_s: float = 0.1, read: Read | None = None) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.index = index
        self.period_s = period_s
        self._read = read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._samples: list[dict[str, Any]] = []
        self._t0 = 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Begin sampling; without a GPU (and no `read` given) this records nothing."""
        if self._thread is not None:
            raise RuntimeError("TelemetryRecorder already started")
        read = self._read
        if read is None:
            found = nvml.device(self.index)
            if found is None:
                return
            read = nvml_reader(*found)
        self._samples = []
        self._stop.clear()
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, args=(read,), daemon=True,
                                        name=f"telemetry-gpu{self.index}")
        self._thread.start()

    def _loop(self, read: Read) -> None:
        while True:
            try:
                s = read()
            except Exception:  # one bad moment must not end the recording or the run
                s = None
            if s is not None:
                self._samples.append({**s, "t_s": round(time.monotonic() - self._t0, 4)})
            if self._stop.wait(self.period_s):
                return

    def stop(self) -> Telemetry | None:
        """End sampling and return what was recorded, or None where nothing was (no GPU)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return None
        self._stop.set()
        thread.join()
        samples, self._samples = self._samples, []
        if not samples:
            return None
        return Telemetry.from_samples(samples, self.period_s, index=self.index)

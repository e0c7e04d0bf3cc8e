"""GPU telemetry over measured steps: the recorder thread, NVML reads that degrade to None, the
summary and flags on a healthy and a power-capped H200 series, the compact series, and the report."""
from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

import pytest

from perfconsole.core.reports.telemetry import flag_text, markdown_lines
from perfconsole.core.telemetry import nvml
from perfconsole.core.telemetry.recorder import TelemetryRecorder, decode_reasons, nvml_reader, reason_bits
from perfconsole.core.telemetry.gpu_summary import FIELDS, MAX_POINTS, Telemetry
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "telemetry"


def load(name: str) -> Telemetry:
    d = json.loads((FIXTURES / name).read_text())
    return Telemetry.from_samples(d["samples"], d["period_s"])


@pytest.fixture
def healthy() -> Telemetry:
    return load("h200_healthy.json")


@pytest.fixture
def capped() -> Telemetry:
    return load("h200_power_capped.json")


def row(lo, mid, hi):
    return {"min": lo, "median": mid, "max": hi}


# --- summary and flags on the recorded series ---------------------------------------------------

def test_healthy_series_summary_is_exact_and_raises_no_flag(healthy):
    assert healthy.samples == 50 and healthy.period_s == 0.1
    assert healthy.summary == {
        "sm_clock_mhz": row(1965.0, 1980.0, 1980.0),
        "mem_clock_mhz": row(3201.0, 3201.0, 3201.0),
        "power_w": row(300.0, 538.25, 649.75),
        "power_limit_w": row(700.0, 700.0, 700.0),
        "temperature_c": row(40.0, 52.0, 64.0),
        "gpu_util_pct": row(87.0, 100.0, 100.0),
        "mem_util_pct": row(45.0, 50.0, 60.0),
        "memory_used_mib": row(61852.0, 61916.0, 61980.0),
    }
    # gpu_idle between steps is in the samples but is neither "seen" nor throttling.
    assert healthy.reason_shares == {"gpu_idle": 0.1}
    assert healthy.reasons_seen == [] and healthy.throttled_share == 0.0
    assert healthy.flags() == [] and flag_text(healthy) is None


def test_power_capped_series_summary_is_exact_and_flags_the_cap_and_the_clock(capped):
    assert capped.summary["sm_clock_mhz"] == row(1695.0, 1725.0, 1980.0)
    assert capped.summary["power_w"] == row(612.0, 699.5, 700.25)
    assert capped.summary["temperature_c"] == row(55.0, 67.25, 70.0)
    assert capped.reasons_seen == ["sw_power_cap"]
    assert capped.reason_shares == {"gpu_idle": 0.04, "sw_power_cap": 0.8}
    assert capped.throttled_share == 0.8
    assert capped.flags() == ["SM clock fell 14.4% (1980 -> 1695 MHz)",
                              "power cap (sw_power_cap) in 80% of samples"]
    assert flag_text(capped) == ("GPU throttled: SM clock fell 14.4% (1980 -> 1695 MHz); "
                                 "power cap (sw_power_cap) in 80% of samples")


def test_sm_clock_flag_fires_just_past_five_percent_of_the_runs_own_maximum():
    def at(clocks):
        return Telemetry.from_samples([{"t_s": i * 0.1, "sm_clock_mhz": c, "reasons": []}
                                       for i, c in enumerate(clocks)], 0.1).flags()
    assert at([2000.0, 1900.0]) == []                       # exactly 5%: steady enough
    assert at([2000.0, 1899.0]) == ["SM clock fell 5.1% (2000 -> 1899 MHz)"]
    assert at([1410.0, 1410.0]) == []                       # a low clock held steady is not a fall


def test_each_thermal_or_power_reason_is_flagged_with_its_share():
    reasons = [["hw_thermal_slowdown", "sw_thermal_slowdown"], ["hw_power_brake_slowdown"], ["hw_slowdown"]]
    reasons += [["applications_clocks_setting"]] * 996 + [["sync_boost"]]
    t = Telemetry.from_samples([{"t_s": float(i), "reasons": r} for i, r in enumerate(reasons)], 1.0)
    assert t.flags() == ["hardware slowdown (hw_slowdown) in <1% of samples",
                         "thermal slowdown (sw_thermal_slowdown) in <1% of samples",
                         "hardware thermal slowdown (hw_thermal_slowdown) in <1% of samples",
                         "power brake (hw_power_brake_slowdown) in <1% of samples"]
    # applications_clocks_setting is seen but is not throttling; sync_boost is.
    assert "applications_clocks_setting" in t.reasons_seen
    assert t.throttled_share == pytest.approx(4 / 1000)


def test_unsupported_fields_summarise_as_none_without_crashing():
    samples = [{"t_s": i * 0.1, "sm_clock_mhz": 1980.0, "mem_clock_mhz": None, "power_w": None,
                "power_limit_w": None, "temperature_c": None, "gpu_util_pct": 99.0, "mem_util_pct": None,
                "memory_used_mib": 1024.0, "reasons": None} for i in range(5)]
    t = Telemetry.from_samples(samples, 0.1)
    assert t.summary["power_w"] is None and t.summary["temperature_c"] is None
    assert t.summary["sm_clock_mhz"] == row(1980.0, 1980.0, 1980.0)
    assert t.reasons_seen == [] and t.reason_shares == {} and t.throttled_share is None
    assert t.flags() == [] and flag_text(t) is None
    md = "\n".join(markdown_lines(t))
    assert "| power draw | W | - | - | - |" in md and "not reported by this GPU" in md
    back = Telemetry.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back == t


def test_an_empty_sample_dict_is_all_none():
    t = Telemetry.from_samples([{}], 0.1)
    assert all(t.summary[f] is None for f in FIELDS) and t.flags() == []


# --- the compact series and the JSON layout ---------------------------------------------------

def test_downsampling_keeps_the_cap_the_ends_and_the_full_run_figures():
    n = 2500
    samples = [{"t_s": i * 0.1, "sm_clock_mhz": 1980.0, "reasons": []} for i in range(n)]
    samples[1234]["sm_clock_mhz"] = 1500.0                  # falls between kept points
    samples[777]["reasons"] = ["sw_thermal_slowdown"]
    t = Telemetry.from_samples(samples, 0.1)
    ts = t.series["t_s"]
    assert len(ts) == MAX_POINTS and t.samples == n
    assert ts[0] == 0.0 and ts[-1] == samples[-1]["t_s"]
    assert all(b > a for a, b in zip(ts, ts[1:]))
    assert all(len(col) == MAX_POINTS for col in t.series.values())
    assert 1500.0 not in t.series["sm_clock_mhz"]
    assert t.summary["sm_clock_mhz"]["min"] == 1500.0      # figures are over every sample
    assert t.reasons_seen == ["sw_thermal_slowdown"]
    assert Telemetry.from_samples(samples[:MAX_POINTS], 0.1).series["t_s"] == [s["t_s"] for s in samples[:MAX_POINTS]]
    assert len(Telemetry.from_samples(samples[:MAX_POINTS + 1], 0.1).series["t_s"]) == MAX_POINTS


def test_to_dict_is_columnar_and_round_trips_through_json(capped):
    d = capped.to_dict()
    assert set(d) >= {"series", "summary", "flags"}
    assert list(d["series"]) == ["t_s", *FIELDS, "reasons"]
    assert d["series"]["sm_clock_mhz"][:3] == [1980.0, 1980.0, 1980.0]
    assert d["series"]["reasons"][10] == ["sw_power_cap"] and d["series"]["reasons"][0] == []
    assert d["flags"] == capped.flags()
    back = Telemetry.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert back == capped
    assert back.to_dict() == d and back.flags() == capped.flags()


# --- the report -------------------------------------------------------------------------------

def test_markdown_section_has_units_reasons_share_and_bold_warnings(capped, healthy):
    md = markdown_lines(capped)
    assert "## GPU telemetry (measured steps)" in md
    assert "| field | unit | min | median | max |" in md
    assert "| SM clock | MHz | 1,695 | 1,725 | 1,980 |" in md
    assert "| power draw | W | 612 | 699.5 | 700.2 |" in md
    assert "| GPU temperature | °C | 55 | 67.2 | 70 |" in md
    assert any("`sw_power_cap` (80%)" in line for line in md)
    assert any(line.startswith("Throttled share: 80%") for line in md)
    assert "- **Warning: SM clock fell 14.4% (1980 -> 1695 MHz).**" in md
    healthy_md = "\n".join(markdown_lines(healthy))
    assert "Warning" not in healthy_md and "seen (share of samples; `gpu_idle` left out): none." in healthy_md


# --- reading NVML -----------------------------------------------------------------------------

class NotSupported(Exception):
    pass


def fake_nvml(with_event_call: bool = True, **broken):
    """A stand-in for pynvml: H200-like figures, and each name in `broken` raising NotSupported."""
    def raising(*_):
        raise NotSupported

    calls = {
        "nvmlDeviceGetClockInfo": lambda h, which: {1: 1980, 2: 3201}[which],
        "nvmlDeviceGetPowerUsage": lambda h: 431_250,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetTemperature": lambda h, which: 47,
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=98, memory=41),
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=2048 * 2**20, total=143771 * 2**20),
        "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0x1 | 0x4,
    }
    if with_event_call:
        calls["nvmlDeviceGetCurrentClocksEventReasons"] = lambda h: 0x4 | 0x40
    calls.update({name: raising for name in broken})
    return SimpleNamespace(NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
                           nvmlClocksEventReasonSwPowerCap=0x4, **calls)


def test_nvml_reader_reads_every_field_in_its_unit():
    assert nvml_reader(fake_nvml(), "h")() == {
        "sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0, "power_w": 431.25, "power_limit_w": 700.0,
        "temperature_c": 47.0, "gpu_util_pct": 98.0, "mem_util_pct": 41.0, "memory_used_mib": 2048.0,
        "reasons": ["sw_power_cap", "hw_thermal_slowdown"]}


def test_nvml_fields_the_card_does_not_support_read_as_none():
    read = nvml_reader(fake_nvml(nvmlDeviceGetPowerUsage=1, nvmlDeviceGetEnforcedPowerLimit=1,
                                 nvmlDeviceGetUtilizationRates=1, nvmlDeviceGetCurrentClocksEventReasons=1,
                                 nvmlDeviceGetCurrentClocksThrottleReasons=1), "h")
    s = read()
    assert s["power_w"] is None and s["power_limit_w"] is None and s["gpu_util_pct"] is None
    assert s["mem_util_pct"] is None and s["reasons"] is None and s["sm_clock_mhz"] == 1980.0
    assert read()["reasons"] is None


def test_reasons_fall_back_to_the_throttle_call_on_older_drivers():
    assert nvml_reader(fake_nvml(with_event_call=False), "h")()["reasons"] == ["gpu_idle", "sw_power_cap"]
    # The newer call exists in pynvml but the driver lacks the symbol.
    assert nvml_reader(fake_nvml(nvmlDeviceGetCurrentClocksEventReasons=1), "h")()["reasons"] == [
        "gpu_idle", "sw_power_cap"]


def test_decode_reasons_uses_nvml_bits():
    assert decode_reasons(0) == []
    assert decode_reasons(0x1FF) == list(reason_bits())
    assert decode_reasons(0x4 | 0x20 | 0x100) == ["sw_power_cap", "sw_thermal_slowdown", "display_clock_setting"]
    try:
        import pynvml
    except ImportError:
        return
    bits = reason_bits(pynvml)
    assert bits["sw_power_cap"] == pynvml.nvmlClocksThrottleReasonSwPowerCap
    assert bits["hw_power_brake_slowdown"] == pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown


# --- the thread -------------------------------------------------------------------------------

def test_recorder_samples_on_its_own_thread_and_stop_joins_it():
    calls = []
    busy = threading.Lock()

    def read():
        # A read entered while another is in flight would find the lock taken.
        assert busy.acquire(blocking=False), "reads overlapped"
        try:
            calls.append(threading.current_thread().name)
            time.sleep(0.005)
            return {"sm_clock_mhz": 1980.0, "power_w": 400.0 + len(calls), "reasons": []}
        finally:
            busy.release()

    rec = TelemetryRecorder(period_s=0.05, read=read)
    rec.start()
    time.sleep(0.3)
    t = rec.stop()
    assert not any(th.name.startswith("telemetry-") and th.is_alive() for th in threading.enumerate())
    assert threading.current_thread().name not in calls and calls[0].startswith("telemetry-")
    assert t is not None and t.samples == len(calls)
    assert 3 <= len(calls) <= 8
    ts = t.series["t_s"]
    assert ts[0] < 0.05 and all(b > a for a, b in zip(ts, ts[1:])) and ts[-1] < 0.5
    assert t.period_s == 0.05 and t.summary["power_w"]["min"] == 401.0
    n = len(calls)
    time.sleep(0.1)
    assert len(calls) == n                                  # nothing samples after stop()


def test_a_read_that_fails_or_gives_nothing_is_skipped():
    seq = iter([{"sm_clock_mhz": 1.0}, None, RuntimeError("GPU fell off the bus"), {"sm_clock_mhz": 2.0}])

    def read():
        item = next(seq, None)
        if isinstance(item, Exception):
            raise item
        return item

    rec = TelemetryRecorder(period_s=0.01, read=read)
    rec.start()
    time.sleep(0.15)
    t = rec.stop()
    assert t is not None and t.series["sm_clock_mhz"] == [1.0, 2.0]


def test_a_recorder_that_never_read_anything_returns_none():
    rec = TelemetryRecorder(period_s=0.01, read=lambda: None)
    rec.start()
    assert rec.stop() is None
    assert TelemetryRecorder().stop() is None               # stop without start


def test_start_twice_is_refused_and_bad_periods_are_rejected():
    rec = TelemetryRecorder(period_s=0.01, read=lambda: {})
    rec.start()
    with pytest.raises(RuntimeError):
        rec.start()
    assert rec.stop() is not None
    with pytest.raises(ValueError):
        TelemetryRecorder(period_s=0)


def test_without_nvml_the_default_recorder_records_nothing(monkeypatch):
    monkeypatch.setattr(nvml, "device", lambda index=0: None)
    rec = TelemetryRecorder()
    rec.start()
    assert not rec.running
    assert rec.stop() is None


def test_on_a_machine_without_a_gpu_the_real_default_recorder_returns_none():
    if nvml.gpu_count() > 0:
        pytest.skip("this machine has a GPU; the gpu test covers it")
    rec = TelemetryRecorder(index=0)
    rec.start()
    time.sleep(0.05)
    assert rec.stop() is None
    rec = TelemetryRecorder(index=7)
    rec.start()
    assert rec.stop() is None


@pytest.mark.gpu
@pytest.mark.shares_gpu
def test_real_nvml_records_clocks_and_power():
    rec = TelemetryRecorder(index=0, period_s=0.1)
    rec.start()
    time.sleep(1.0)
    t = rec.stop()
    assert t is not None and 5 <= t.samples <= 12
    for f in ("sm_clock_mhz", "power_w"):
        assert all(isinstance(v, float) and v > 0 for v in t.series[f]), (f, t.series[f])
    assert t.summary["power_limit_w"] is None or t.summary["power_limit_w"]["max"] > 0
    assert all(isinstance(r, list) for r in t.series["reasons"])
    json.dumps(t.to_dict(), allow_nan=False)
    print("\n".join(markdown_lines(t)))

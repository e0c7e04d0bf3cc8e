"""Speed of light: the floors' arithmetic, overrides, the peak cache, and the GPU busy share's labels."""
from __future__ import annotations

import json

import pytest

from perfconsole.core import events as ev
from perfconsole.core.flops import (Peaks, adamw_bytes, beaten_text, busy_label, cache_key, cached_peaks, floors_ms,
                                    forget_peaks, save_peaks, sol_fraction, speed_of_light)
from perfconsole.core.paths import data_dir
from perfconsole.core.settings import RunSpec
from perfconsole.core.run_summary import Summary, compute_summary

# d_model 64, d_ff 128, 1 layer, vocab 100, batch 2, ctx 8: small enough to count by hand.
SPEC = RunSpec(size="custom", d_model=64, d_ff=128, n_layers=1, n_heads=4, vocab_size=100, batch=2, ctx=8,
               mode="train", device="cpu")
PEAKS = {"device": "test", "matmul_tflops": {"fp32": 1.0, "bf16": 2.0, "fp16": 2.0, "tf32": 1.5},
         "bandwidth_gbps": 100.0, "source": "measured"}


def test_floors_by_hand():
    tokens = 16
    dense = 2 * tokens * (4 * 64 * 64 + 3 * 64 * 128 + 64 * 100)
    attention = 2 * (2 * 2 * 8 * 8 * 64)
    fwd_ms = (dense + attention) / 1e12 * 1e3          # at 1 TFLOP/s
    params = 2 * 100 * 64 + (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    assert adamw_bytes(SPEC) == 28 * params
    opt_ms = 28 * params / 100e9 * 1e3                  # at 100 GB/s
    f = floors_ms(SPEC, 1.0, 100.0)
    assert f["forward_ms"] == pytest.approx(fwd_ms)
    assert f["backward_ms"] == pytest.approx(2 * fwd_ms)
    assert f["optimizer_ms"] == pytest.approx(opt_ms)
    assert f["total_ms"] == pytest.approx(3 * fwd_ms + opt_ms)
    fwd_only = floors_ms(SPEC.with_(mode="fwd"), 1.0, 100.0)
    assert fwd_only["backward_ms"] is None and fwd_only["total_ms"] == pytest.approx(fwd_ms)


def _steps(total: float, host: float | None = None) -> list[ev.Step]:
    return [ev.Step(i, False, total, total / 4, total / 2, total / 4, loss=1.0, host_ms=host) for i in range(3)]


def test_summary_fraction_uses_the_precisions_peak_and_overrides_say_so():
    s = compute_summary(SPEC.with_(precision="bf16"), _steps(10.0), [], None, peaks=PEAKS)
    sol = s.speed_of_light
    floors = floors_ms(SPEC, 2.0, 100.0)
    assert sol["total_ms"]["floor_ms"] == pytest.approx(floors["total_ms"])
    assert sol["total_ms"]["measured_ms"] == 10.0
    assert sol["total_ms"]["fraction"] == pytest.approx(floors["total_ms"] / 10.0)
    assert sol["optimizer_ms"]["fraction"] == pytest.approx(floors["optimizer_ms"] / 2.5)
    assert sol["peaks"]["matmul_source"] == "measured" and sol["peaks"]["precision"] == "bf16"
    over = compute_summary(SPEC.with_(peak_tflops=4.0, peak_gbps=50.0), _steps(10.0), [], None, peaks=PEAKS)
    p = over.speed_of_light["peaks"]
    assert (p["matmul_tflops"], p["matmul_source"], p["bandwidth_gbps"], p["bandwidth_source"]) == (
        4.0, "override", 50.0, "override")
    assert speed_of_light(SPEC, {}, None) is None


def test_events_busy_share_is_the_lower_bound_and_names_only_a_gpu_bound_step():
    gpu_bound = compute_summary(SPEC, _steps(10.0, host=2.0), [], None)
    assert gpu_bound.gpu_busy_share == pytest.approx(0.8) and gpu_bound.gpu_busy_source == "events"
    assert gpu_bound.bound == "gpu-bound"
    # The host's time also holds its waits for the GPU: a bound near 0 names nothing (2.7B DDP read 2 %
    # while NVML saw 75-100 % busy).
    low = compute_summary(SPEC, _steps(10.0, host=9.8), [], None)
    assert low.bound is None and low.gpu_busy_share == pytest.approx(0.02)
    saved = dict(low.to_dict(), bound="host-bound")   # a snapshot named by the old rule
    assert Summary.from_dict(saved).bound is None
    assert compute_summary(SPEC, _steps(10.0), [], None).gpu_busy_share is None   # the CPU: not known
    profiled = compute_summary(SPEC, _steps(10.0, host=2.0), [], None, profile_busy=0.6)
    assert (profiled.gpu_busy_share, profiled.gpu_busy_source, profiled.bound) == (0.6, "profile", "host-bound")
    assert busy_label(0.85, "profile") == "gpu-bound" and busy_label(0.3, "events") is None


@pytest.mark.fresh_data_dir
def test_cache_is_keyed_kept_per_device_and_written_whole():
    key = cache_key("NVIDIA H200", "570.1", "2.13.0")
    assert cached_peaks(key) is None
    save_peaks(Peaks(key, {"bf16": 800.0}, 4000.0))
    other = cache_key("NVIDIA H200", "580.2", "2.13.0")      # a new driver is another device
    save_peaks(Peaks(other, {"bf16": 810.0}, 4100.0))
    found = cached_peaks(key)
    assert found is not None and found.source == "cached" and found.matmul_tflops == {"bf16": 800.0}
    assert cached_peaks(other).bandwidth_gbps == 4100.0
    files = sorted(p.name for p in data_dir().iterdir())
    assert files == ["peaks.json"]                          # no temporary file left behind
    assert set(json.loads((data_dir() / "peaks.json").read_text())) == {key, other}


@pytest.mark.fresh_data_dir
def test_a_damaged_cache_means_measure_again():
    data_dir().mkdir(parents=True, exist_ok=True)
    (data_dir() / "peaks.json").write_text("{not json")
    assert cached_peaks("x") is None
    save_peaks(Peaks("x", {"fp32": 1.0}, 2.0))                # and writing replaces it
    assert cached_peaks("x").matmul_tflops == {"fp32": 1.0}


@pytest.mark.fresh_data_dir
def test_a_step_faster_than_its_floor_refutes_the_peaks_and_no_fraction_is_shown():
    low = {**PEAKS, "matmul_tflops": {"fp32": 1e-9}, "bandwidth_gbps": 1e-6}  # a busy device's "peaks"
    sol = compute_summary(SPEC, _steps(10.0), [], None, peaks=low).speed_of_light
    assert sol["beaten"] == ["forward_ms", "backward_ms", "optimizer_ms", "total_ms"]
    assert sol["total_ms"]["fraction"] > 1 and sol_fraction(sol) is None and sol_fraction(sol, "forward_ms") is None
    said = beaten_text(sol)
    assert said.startswith("speed of light: the total ran in 10.000 ms, under its floor of ")
    assert "fp32 1e-09 TFLOP/s, 1e-06 GB/s, measured" in said
    fp8 = compute_summary(SPEC.with_(precision="bf16", fp8=True), _steps(10.0), [], None,
                          peaks={**low, "matmul_tflops": {"bf16": 1e-9}}).speed_of_light
    assert fp8["beaten"] == [] and fp8["total_ms"]["fraction"] > 1   # fp8 passes the bf16 peak it is held to
    fine = compute_summary(SPEC, _steps(10.0), [], None, peaks=PEAKS).speed_of_light
    assert fine["beaten"] == [] and beaten_text(fine) is None and sol_fraction(fine) == fine["total_ms"]["fraction"]
    # 5% faster than the floor is a clock's boost, not proof
    edge = {**PEAKS, "matmul_tflops": {"fp32": 1.0}, "bandwidth_gbps": 1e12}
    floor = floors_ms(SPEC, 1.0, 1e12)["total_ms"]
    assert "total_ms" not in compute_summary(SPEC, _steps(floor / 1.04), [], None, peaks=edge).speed_of_light["beaten"]
    assert "total_ms" in compute_summary(SPEC, _steps(floor / 1.06), [], None, peaks=edge).speed_of_light["beaten"]


@pytest.mark.fresh_data_dir
def test_forgetting_peaks_drops_one_device_and_keeps_the_others():
    assert forget_peaks("x") is False                       # no cache file yet
    save_peaks(Peaks("x", {"fp32": 1.0}, 2.0))
    save_peaks(Peaks("y", {"fp32": 3.0}, 4.0))
    assert forget_peaks("x") is True and forget_peaks("x") is False
    assert cached_peaks("x") is None and cached_peaks("y").matmul_tflops == {"fp32": 3.0}


@pytest.mark.fresh_data_dir
def test_only_cached_peaks_are_dropped_when_beaten_since_measuring_again_gives_the_same():
    from perfconsole.core.measure.device_peaks import refute_peaks

    low = {**PEAKS, "matmul_tflops": {"fp32": 1e-9}, "bandwidth_gbps": 1e-6, "device": "x"}
    for source, dropped in (("measured", False), ("override", False), ("cached", True)):
        save_peaks(Peaks("x", {"fp32": 1e-9}, 1e-6))
        sol = compute_summary(SPEC, _steps(10.0), [], None, peaks={**low, "source": source}).speed_of_light
        said: list[str] = []
        refute_peaks(sol, said.append)
        assert len(said) == 1 and said[0].startswith("speed of light: the total ran in")
        assert said[0].endswith("the next run measures them again") == dropped
        assert (cached_peaks("x") is None) == dropped, source

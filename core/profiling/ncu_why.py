"""Why each kernel that matters takes its time: ncu's launches (core.profiling.ncu_kernels' rows) joined by
kernel name to the kernels' times in the run's own profile, held against the device's measured peaks.

Per kernel (its launch configurations pooled, weighted by ncu's duration of each):

- `compute_pct`, `memory_pct`: ncu's speed of light, % of the device's peak throughput as ncu counts it;
- `bound`: `latency` where neither reaches LATENCY_BELOW % (ncu's own SOLBottleneck reads such a kernel as
  latency-bound), else whichever is higher, `compute` or `memory`;
- `tflops`, `gbps`: FLOPs (flops_source says which counters) and DRAM bytes over ncu's duration, and each as a
  share of the measured peak (the dense matmul peak of the kernel's precision; the copy bandwidth);
- `intensity` (FLOP/byte of DRAM) against the ridge point of the measured peaks: `side` compute or memory;
- the kernel's time per step and share of the step from the run's profile (the timed program's durations, not
  ncu's replays), and `gain_ms`: what fixing it could save, time per step x (1 - fraction of its limit), the
  limit being the higher of compute % and memory %; rows are sorted by it;
- occupancy, registers, and the rule ncu estimates would gain most, with its estimated speedup (% of the kernel).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from perfconsole.core.profiling.ncu_kernels import kernel_key

LATENCY_BELOW = 60.0
_WEIGHTED = ("compute_pct", "memory_pct", "dram_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
             "registers_per_thread", "waves_per_sm")


def why_frame(launches: Sequence[Mapping[str, Any]], times: Sequence[Mapping[str, Any]] | None,
              peaks: Mapping[str, Any] | None, steps: int | None, step_ms: float | None) -> pd.DataFrame:
    """A row per kernel ncu profiled, sorted by gain_ms (largest first; kernels without a time last).

    `times`: the profile's cuda_gpu_kern_sum rows (over `steps` profiled steps); `peaks`: core.flops.Peaks'
    dict (matmul_tflops per precision, bandwidth_gbps); `step_ms`: the headline's median step."""
    if not launches:
        return pd.DataFrame()
    df = pd.DataFrame(list(launches))
    df["key"] = df["kernel"].map(kernel_key)
    df["w"] = df["duration_s"].fillna(0).clip(lower=0)
    df["w"] = df["w"].where(df.groupby("key")["w"].transform("sum") > 0, 1.0)
    rows = [_one(key, g) for key, g in df.groupby("key", sort=False)]
    out = pd.DataFrame(rows)
    out = _with_times(out, times, steps, step_ms)
    out = _against_peaks(out, peaks)
    limit = out[["compute_pct", "memory_pct"]].max(axis=1) / 100
    out["limit_fraction"] = limit
    out["gain_ms"] = out["ms_per_step"] * (1 - limit.clip(upper=1))
    return out.sort_values(["gain_ms", "duration_us"], ascending=False, na_position="last", kind="stable"
                           ).reset_index(drop=True)


def _one(key: str, g: pd.DataFrame) -> dict[str, Any]:
    w = g["w"]
    row: dict[str, Any] = {"key": key, "name": g["kernel"].iloc[0], "configs": len(g)}
    for col in _WEIGHTED:
        v = g[col] if col in g else pd.Series(math.nan, index=g.index)
        ok = v.notna()
        row[col] = float((v[ok] * w[ok]).sum() / w[ok].sum()) if ok.any() and w[ok].sum() > 0 else math.nan
    dur = g["duration_s"].sum(min_count=1)
    row["duration_us"] = dur * 1e6 if pd.notna(dur) else math.nan
    row["flops"] = g["flops"].sum(min_count=1) if "flops" in g else math.nan
    row["ncu_roofline_flops"] = g["ncu_roofline_flops"].sum(min_count=1) if "ncu_roofline_flops" in g else math.nan
    row["dram_bytes"] = g["dram_bytes"].sum(min_count=1) if "dram_bytes" in g else math.nan
    row["flops_source"] = g["flops_source"].iloc[0] if "flops_source" in g else "none"
    prec = g["precision"].dropna() if "precision" in g else pd.Series(dtype=object)
    row["precision"] = prec.mode().iloc[0] if len(prec) else None
    longest = g.sort_values("w", ascending=False, kind="stable").iloc[0]
    ruled = g.dropna(subset=["rule_speedup_pct"]) if "rule_speedup_pct" in g else g.iloc[0:0]
    best = ruled.sort_values("rule_speedup_pct", ascending=False, kind="stable").iloc[0] if len(ruled) else None
    row["rule"] = best["rule"] if best is not None else None
    row["rule_speedup_pct"] = float(best["rule_speedup_pct"]) if best is not None else math.nan
    row["rule_text"] = best["rule_text"] if best is not None else None
    row["bottleneck"] = longest.get("bottleneck")
    hi = max(row["compute_pct"], row["memory_pct"]) if not (math.isnan(row["compute_pct"])
                                                            and math.isnan(row["memory_pct"])) else math.nan
    row["bound"] = (None if math.isnan(hi) else "latency" if hi < LATENCY_BELOW
                    else "compute" if row["compute_pct"] >= row["memory_pct"] else "memory")
    return row


def _with_times(out: pd.DataFrame, times: Sequence[Mapping[str, Any]] | None, steps: int | None,
                step_ms: float | None) -> pd.DataFrame:
    out["ms_per_step"] = math.nan
    out["avg_us"] = math.nan
    out["step_share"] = math.nan
    if not times:
        return out
    t = pd.DataFrame(list(times))
    t["key"] = t["name"].map(kernel_key)
    per = t.groupby("key").agg(total_ns=("total_time_ns", "sum"), instances=("instances", "sum"))
    hit = out["key"].isin(per.index)
    n = steps or 1
    total = per.loc[out.loc[hit, "key"], "total_ns"].to_numpy(dtype=float)
    count = per.loc[out.loc[hit, "key"], "instances"].to_numpy(dtype=float)
    out.loc[hit, "ms_per_step"] = total / 1e6 / n
    out.loc[hit, "avg_us"] = total / 1e3 / count.clip(min=1)
    if step_ms:
        out.loc[hit, "step_share"] = out.loc[hit, "ms_per_step"] / step_ms
    return out


def _against_peaks(out: pd.DataFrame, peaks: Mapping[str, Any] | None) -> pd.DataFrame:
    secs = out["duration_us"] / 1e6
    out["tflops"] = out["flops"] / secs / 1e12
    out["ncu_roofline_tflops"] = out["ncu_roofline_flops"] / secs / 1e12
    out["gbps"] = out["dram_bytes"] / secs / 1e9
    out["intensity"] = out["flops"] / out["dram_bytes"].where(out["dram_bytes"] > 0)
    tflops = dict((peaks or {}).get("matmul_tflops") or {})
    bw = (peaks or {}).get("bandwidth_gbps")
    out["peak_tflops"] = out["precision"].map(lambda p: tflops.get(p) if p else None).astype(float)
    out["tflops_pct"] = 100 * out["tflops"] / out["peak_tflops"]
    out["gbps_pct"] = 100 * out["gbps"] / bw if bw else math.nan
    out["ridge"] = out["peak_tflops"] * 1e12 / (bw * 1e9) if bw else math.nan
    side = out["intensity"] >= out["ridge"]
    known = out["intensity"].notna() & out["ridge"].notna()
    out["side"] = side.map({True: "compute", False: "memory"}).where(known, None)
    return out


def why_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows to draw or write: NaN as None."""
    if frame.empty:
        return []
    return frame.astype(object).where(frame.notna(), None).to_dict("records")

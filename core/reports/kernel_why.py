"""A run's "why" view (core.profiling.ncu_why) from its record, and the lines that say what its numbers are:
the one view the headless `perfconsole kernels --why` and the console's kernel detail both show."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from perfconsole.core.flops import peaks_figures
from perfconsole.core.profiling.ncu_why import LATENCY_BELOW, why_frame, why_rows
from perfconsole.core.record import RunRecord

NCU_TABLE = "ncu_kernels"
FLOPS_SOURCES = {
    "tensor pipes + sass": "FLOPs from the tensor pipes' op counters (sm__ops_path_tensor_*) plus the SASS "
                           "fp32/fp16/fp64 instruction counters",
    "sass": "FLOPs from the SASS instruction counters alone (ncu's roofline): tensor-core work is not counted",
    "none": "the report holds no FLOP counters: no TFLOP/s",
}


@dataclass
class KernelWhy:
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    missing: str | None = None  # why there is no view: one line

    def row(self, name: str) -> dict[str, Any] | None:
        """The row of a kernel, by its name as the profile's tables give it."""
        from perfconsole.core.profiling.ncu_kernels import kernel_key

        key = kernel_key(name)
        return next((r for r in self.rows if r["key"] == key), None)


def peaks_of(record: RunRecord) -> dict[str, Any] | None:
    """The record's measured peaks, with the spec's overrides (--peak-tflops for its precision, --peak-gbps)."""
    peaks = dict(peaks_figures(record.peaks) or {})  # a run that measured none has only overrides
    spec = record.spec
    if spec.peak_tflops:
        key = "tf32" if spec.precision == "fp32" and spec.tf32 else spec.precision
        peaks["matmul_tflops"] = {**(peaks.get("matmul_tflops") or {}), key: spec.peak_tflops}
    if spec.peak_gbps:
        peaks["bandwidth_gbps"] = spec.peak_gbps
    return peaks or None


def kernel_why(record: RunRecord) -> KernelWhy:
    p = record.profile
    launches = (p.tables.get(NCU_TABLE) if p else None) or []
    if not launches:
        return KernelWhy([], missing=f"{record.name}: no Nsight Compute tables (run it with --profile ncu on a GPU "
                                     "where ncu is installed)")
    overhead = (p.overhead if p else None) or {}
    imported = record.status == "imported"  # no steps: a capture's totals, "per step" of one
    steps = 1 if imported else overhead.get("profiled_steps") or record.spec.steps
    step_ms = record.summary.total_ms.median if record.summary and record.summary.total_ms else None
    peaks = peaks_of(record)
    frame: pd.DataFrame = why_frame(launches, p.tables.get("cuda_gpu_kern_sum") if p else None, peaks, steps, step_ms)
    notes = []
    sources = sorted(set(frame["flops_source"].dropna())) if not frame.empty else []
    notes += [FLOPS_SOURCES.get(s, s) for s in sources]
    if peaks:
        tf = ", ".join(f"{k} {v:,.1f}" for k, v in sorted((peaks.get("matmul_tflops") or {}).items()))
        bw = peaks.get("bandwidth_gbps")
        notes.append(f"against the measured peaks ({peaks.get('source', 'override')}): matmul TFLOP/s {tf}; "
                     + (f"copy {bw:,.0f} GB/s" if bw else "no bandwidth"))
    else:
        notes.append("no measured peaks in the record: no % of peak, no ridge point")
    run = ((p.tables.get("ncu_run") if p else None) or [{}])[0]
    notes.append(run.get("note") or "ncu replays each kernel: its durations are not the timed steps'")
    missed = run.get("kernels_not_profiled") or []
    if missed:
        notes.append(f"{len(missed)} of the {len(run.get('kernels_asked') or [])} kernels asked of ncu are not in "
                     f"its report, so not in this view: {'; '.join(m[:90] for m in missed)}")
    if run.get("quiet_ms") and step_ms:
        notes.append(f"the ncu process's own quiet steps: median {run['quiet_ms']:.3f} ms against the headline's "
                     f"{step_ms:.3f} ms (not the headline)")
    if imported:
        notes.append("an import has no steps: each kernel's time is its total in the imported capture "
                     + ("(the nsys kernel summary beside it)" if p and p.tables.get("cuda_gpu_kern_sum") else
                        "(none here: no nsys or torch kernel summary beside the ncu pages)"))
    notes.append(f"bound: latency where neither compute nor memory reaches {LATENCY_BELOW:.0f} % of peak; gain = time per step x "
                 f"(1 - the higher of the two); time per step from the {p.profiler if p else ''} profile")
    return KernelWhy(why_rows(frame), notes)

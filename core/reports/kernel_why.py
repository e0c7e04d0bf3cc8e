"""A run's "why" view (core.profiling.ncu_why) from its record, and the lines that say what its numbers are:
the one view the headless `perfconsole kernels --why` and the console's kernel detail both show."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from perfconsole.core.flops import peaks_figures
from perfconsole.core.profiling.ncu_summary import KERNELS, replay_times
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
    replay: bool = False  # the times are ncu's replay durations (an import of its pages alone)

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
    times = (p.tables.get(KERNELS) if p else None) or []
    if imported and times:  # the "step" of an import: all the kernel time it holds
        step_ms = sum(r.get("total_time_ns") or 0 for r in times) / 1e6 or None
    peaks = peaks_of(record)
    frame: pd.DataFrame = why_frame(launches, times, peaks, steps, step_ms)
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
    replay = bool(p and replay_times(p.tables))
    if imported:
        notes.append("an import has no steps: " + (
            "each kernel's time is the sum of its profiled launches' durations under ncu's replay (no capture "
            "beside the pages), and step (%) its share of them all" if replay else
            "each kernel's time is its total in the imported capture (the kernel summary beside the pages), and "
            "step (%) its share of the capture's kernel time" if times else
            "no kernel times (no capture beside the pages, and no duration in them)"))
    time = "time: ncu's replay durations" if replay else f"time per step from the {p.profiler if p else ''} profile"
    notes.append(f"bound: latency where neither compute nor memory reaches {LATENCY_BELOW:.0f} % of peak; gain = "
                 f"time{'' if replay else ' per step'} x (1 - the higher of the two); {time}")
    return KernelWhy(why_rows(frame), notes, replay=replay)


def markdown_lines(r: RunRecord) -> list[str]:
    """Nsight Compute's kernels in a Markdown report: why each takes its time, then the roofline picture."""
    from perfconsole.core.reports.roofline import roofline_lines

    why = kernel_why(r)
    time, gain = ("ncu replay (ms)", "could save (ms of replay)") if why.replay else ("ms/step", "could save (ms/step)")
    out = ["", "## Why the kernels take their time (Nsight Compute)", "",
           f"| # | kernel | {time} | {gain} | compute (%) | memory (%) | TFLOP/s | GB/s | "
           "FLOP/byte | side | bound | top rule |",
           "| --: | --- | --: | --: | --: | --: | --: | --: | --: | --- | --- | --- |"]
    for i, w in enumerate(why.rows, 1):
        cells = [_f(w.get(k), d) for k, d in (("ms_per_step", 3), ("gain_ms", 3), ("compute_pct", 1), ("memory_pct", 1),
                                              ("tflops", 2), ("gbps", 0), ("intensity", 2))]
        name = str(w.get("name") or "")[:70].replace("|", "/")
        out.append(f"| {i} | {name} | {' | '.join(cells)} | {w.get('side') or '-'} | {w.get('bound') or '-'} | "
                   f"{w.get('rule') or '-'} |")
    out += ["", *(f"- {n}" for n in why.notes)]
    picture = roofline_lines(why.rows, peaks_of(r), ascii_only=True, replay=why.replay)
    if picture:
        out += ["", "Roofline (log-log; the run's measured peaks as roofs):", "", "```", *picture, "```"]
    return out


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"

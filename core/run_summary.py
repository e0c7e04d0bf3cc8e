"""The summary of a run: step and phase statistics, throughput, FLOPs, MFU and peak memory.

Computed by one function from the measured steps, so the worker's summary and the one the console
rebuilds from a partial run (after a crash or a cancel) are the same numbers.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, replace
from typing import Any

from perfconsole.core.events import Step
from perfconsole.core.flops import busy_label, peak_tflops, speed_of_light, step_flops
from perfconsole.core.settings import RunSpec
from perfconsole.core.stats import Stat, refit, summarize

PHASES = ("total_ms", "forward_ms", "backward_ms", "optimizer_ms")


@dataclass(frozen=True)
class Summary:
    total_ms: Stat
    forward_ms: Stat | None
    backward_ms: Stat | None
    optimizer_ms: Stat | None
    warmup_ms: list[float]          # total ms of each warm-up step, in order
    tokens_per_s: float             # batch * ctx / mean step time
    flops_per_step: float
    achieved_tflops: float          # flops_per_step / mean step time
    peak_tflops: float | None       # the GPU's dense peak for this precision, if known
    mfu: float | None               # achieved / peak, 0..1
    peak_allocated_mib: float | None = None
    peak_reserved_mib: float | None = None
    processes: int = 1              # replicate processes whose steps are pooled here
    # Per phase, the statistics of the processes' median step times (n = processes); None for one process.
    between_processes: dict[str, Stat] | None = None
    # core.flops: {phase: {floor_ms, measured_ms, fraction}, "peaks": {...}}; None without peaks.
    speed_of_light: dict[str, Any] | None = None
    # Share of the step with GPU kernels running: "profile" measures it (union of kernel intervals over
    # the profiled steps' time), "nvml" is NVML's utilisation over the measured steps (with_nvml_busy), "events"
    # gives a lower bound where neither exists (core.measure.pipeline.launch_step); None on the CPU.
    gpu_busy_share: float | None = None
    gpu_busy_source: str | None = None
    bound: str | None = None        # host-bound | gpu-bound | None (core.flops.busy_label)
    # Data-parallel jobs (README "Data parallel"): tokens/s, FLOPs and MFU above are the whole job's
    # (world_size ranks, each with the spec's batch), the step is the slowest rank's.
    world_size: int = 1
    # Time with a collective in flight per step (the job step's rank), waits included: from the steps run
    # with the communication timer on after the quiet ones (older records: from the quiet steps).
    comm_ms: Stat | None = None
    comm_share: float | None = None           # mean comm_ms / mean step
    comm_timed_ms: float | None = None        # median step of the steps with the communication timer on
    comm_timer_cost: float | None = None      # comm_timed_ms / median quiet step: what timing the collectives cost
    comm_free_ms: float | None = None         # median step with DDP's all-reduce skipped (no_sync)
    exposed_comm_ms: float | None = None      # median step - comm_free_ms: communication the step waited for
    comm_hidden_share: float | None = None    # 1 - exposed / median comm_ms, 0..1: what DDP's overlap hid
    slowest_rank: dict[str, int] | None = None  # rank -> measured steps in which it was the slowest
    single_process_ms: float | None = None    # median step of the one-process run of the same spec
    scaling_efficiency: float | None = None   # single_process_ms / median step (weak scaling)
    # single_process_ms over the 95% interval of the job's step between its ranks' medians (ranks are processes)
    scaling_efficiency_ci95: list[float] | None = None
    # Where flops_per_step came from: counted (torch.utils.flop_counter, core.measure.model_build) or formula
    # (core.flops); None in a record from before FLOPs were counted, whose figure is the formula's.
    flops_source: str | None = None
    # Median host time to issue the forward (CUDA): a forward timed near it was paced by the host.
    host_forward_ms: float | None = None
    host_backward_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        d = dict(d)
        for name in PHASES:
            if d.get(name) is not None:
                d[name] = Stat.from_dict(d[name])
        if d.get("comm_ms") is not None:
            d["comm_ms"] = Stat.from_dict(d["comm_ms"])
        if d.get("between_processes"):
            d["between_processes"] = {k: Stat.from_dict(v) for k, v in d["between_processes"].items()}
        if d.get("gpu_busy_share") is not None:  # named by today's rule (a saved label may predate it)
            d["bound"] = busy_label(d["gpu_busy_share"], d.get("gpu_busy_source"))
        return cls(**d)

    def interval_stat(self, phase: str = "total_ms") -> Stat | None:
        """The statistics a comparison should use: between processes where there are several."""
        if self.between_processes and phase in self.between_processes:
            return self.between_processes[phase]
        return getattr(self, phase)


def between_processes(summaries: list[Summary]) -> dict[str, Stat] | None:
    """Each phase's statistics over the processes' medians (mean, median and the median's interval)."""
    if len(summaries) < 2:
        return None
    out = {}
    for name in PHASES:
        medians = [getattr(s, name).median for s in summaries if getattr(s, name) is not None]
        if len(medians) == len(summaries):
            out[name] = summarize(medians)
    return out


def refit_intervals(summary: Summary | None, steps: list[Step], processes: list[Summary]) -> Summary | None:
    """A summary loaded from an older record, whose intervals were of the geometric mean, with the median's
    recomputed from the values it was computed from: each phase's from `steps`, those between processes from
    `processes` (the replicates' or the ranks' summaries). Statistics whose values are gone keep none."""
    if summary is None:
        return None
    fresh = {name: summarize(values) for name in PHASES
             if steps and None not in (values := [getattr(s, name) for s in steps])}
    changes: dict[str, Any] = {name: refit(getattr(summary, name), fresh.get(name)) for name in PHASES}
    if summary.between_processes:
        between = between_processes(processes) or {}
        changes["between_processes"] = {k: refit(v, between.get(k)) for k, v in summary.between_processes.items()}
    return replace(summary, **changes)


def compute_summary(spec: RunSpec, steps: list[Step], warmup_steps: list[Step],
                    gpu_name: str | None, peak_override: float | None = None,
                    peak_allocated_mib: float | None = None,
                    peak_reserved_mib: float | None = None, peaks: dict[str, Any] | None = None,
                    profile_busy: float | None = None,
                    comm_free_ms: list[float] | None = None,
                    comm_steps: dict[str, list] | None = None, model: dict[str, Any] | None = None) -> Summary | None:
    """None when no measured step exists yet. `model` is the run's ev.ModelReady info: its FLOPs (counted,
    or the formula's) replace the builtin formula's where present. With nproc > 1 the throughput is the job's; speed of light
    and the GPU's busy share are one rank's (each rank has the spec's batch on a GPU of its own)."""
    if not steps:
        return None

    def stat(attr: str) -> Stat | None:
        values = [getattr(s, attr) for s in steps]
        return None if any(v is None for v in values) else summarize(values)

    total = summarize([s.total_ms for s in steps])
    world = spec.nproc
    flops = world * model_step_flops(spec, model)
    seconds = total.mean / 1e3
    achieved = flops / seconds / 1e12
    peak = peak_override if peak_override else (
        peak_tflops(gpu_name, spec.precision, spec.tf32) if spec.device == "cuda" else None)
    phases = {"total_ms": total, "forward_ms": stat("forward_ms"), "backward_ms": stat("backward_ms"),
              "optimizer_ms": stat("optimizer_ms")}
    busy, source = (profile_busy, "profile") if profile_busy is not None else (_events_busy(steps), "events")
    source = source if busy is not None else None
    peak = peak * world if peak else None
    summary = Summary(
        total_ms=total, forward_ms=phases["forward_ms"], backward_ms=phases["backward_ms"],
        optimizer_ms=phases["optimizer_ms"], warmup_ms=[s.total_ms for s in warmup_steps],
        tokens_per_s=world * spec.tokens_per_step / seconds, flops_per_step=flops,
        achieved_tflops=achieved, peak_tflops=peak, mfu=achieved / peak if peak else None,
        peak_allocated_mib=peak_allocated_mib, peak_reserved_mib=peak_reserved_mib,
        speed_of_light=speed_of_light(spec, phases, peaks, model), gpu_busy_share=busy, gpu_busy_source=source,
        bound=busy_label(busy, source), flops_source=(model or {}).get("flops_source", "formula"),
        host_forward_ms=getattr(stat("host_forward_ms"), "median", None),
        host_backward_ms=getattr(stat("host_backward_ms"), "median", None),
    )
    return summary if world == 1 else with_job_fields(summary, world, steps, comm_free_ms, comm_steps)


def model_step_flops(spec: RunSpec, model: dict[str, Any] | None) -> float:
    """One process's FLOPs per step: the model's (counted) where the record has them, else the formula's."""
    if model and model.get("forward_flops"):
        return float(model["forward_flops"]) + (0.0 if spec.mode == "fwd" else float(model["backward_flops"]))
    d_model, d_ff, n_layers, _ = spec.dims()
    return step_flops(spec.mode, d_model, d_ff, n_layers, spec.vocab, spec.batch, spec.ctx)


# NVML's utilisation is the share of its last sample period in which a kernel ran, and that period is 1/6 s
# to 1 s by product (nvmlDeviceGetUtilizationRates). A sample taken less than this long after the measured
# steps began may still average the time before them (a warm-up's compile, its idle GPU): on an H200 the first
# three samples of a 0.6 s ladder rung read 5 % busy, the next 94-96 %.
NVML_WINDOW_S = 1.0


def nvml_busy_share(series: dict[str, list], summary: dict[str, Any]) -> float | None:
    """NVML's utilisation over the measured steps, as a share (0..1): the mean over the samples taken at
    least NVML_WINDOW_S into the steps of the share of each sample period in which a kernel ran. None where
    the GPU never reported it, or where the steps were too short for a sample to cover them alone. Takes
    the telemetry record's `series` and `summary` (core.telemetry.gpu_summary.Telemetry.to_dict)."""
    util, at = series.get("gpu_util_pct") or [], series.get("t_s") or []
    if util and len(at) == len(util):  # every sample, or an even spread of them (MAX_POINTS)
        inside = [float(v) for t, v in zip(at, util) if v is not None and t is not None and t >= NVML_WINDOW_S]
        return statistics.fmean(inside) / 100 if inside else None
    s = summary.get("gpu_util_pct")  # a record without sample times
    return s["median"] / 100 if s else None


def with_nvml_busy(summary: Summary | None, telemetry: dict[str, Any] | None) -> Summary | None:
    """The summary with NVML's utilisation over the measured steps as its GPU busy share, where no profile
    measured it. The events give only a lower bound, and a loose one: 5-8% on an H200 for steps whose
    kernels ran 65-75% of the time. Unchanged without telemetry or a utilisation figure in it."""
    if summary is None or not telemetry or summary.gpu_busy_source == "profile":
        return summary
    share = nvml_busy_share(telemetry.get("series") or {}, telemetry.get("summary") or {})
    if share is None:
        return summary
    return replace(summary, gpu_busy_share=share, gpu_busy_source="nvml", bound=busy_label(share, "nvml"))


# What each gpu_busy_source is, in words (README "GPU busy share").
BUSY_SOURCES = {"profile": "the profiler's kernel time over the profiled steps",
                "nvml": "NVML's utilisation over the measured steps, from 1 s in",
                "events": "CUDA events: a lower bound, no profiler or NVML figure"}


def busy_text(share: float | None, source: str | None, bound: str | None = None, digits: int = 0) -> str:
    """The GPU busy share with where it came from, for a table cell: "91% nvml gpu-bound", ">= 6% events", "-"."""
    if share is None:
        return "-"
    figure = f"{100 * share:.{digits}f}%"
    return f"{'>= ' if source == 'events' else ''}{figure} {source}" + (f" {bound}" if bound else "")


def busy_sentence(share: float | None, source: str | None, bound: str | None = None) -> str | None:
    """"GPU busy 91% of the step (nvml: NVML's utilisation over the measured steps): gpu-bound"; None unknown."""
    if share is None:
        return None
    lower = "at least " if source == "events" else ""
    return (f"GPU busy {lower}{share:.0%} of the step ({source}: {BUSY_SOURCES.get(source or '', 'unknown')})"
            + (f": {bound}" if bound else ""))


def _events_busy(steps: list[Step]) -> float | None:
    """The median over steps of (GPU span - host issue time) / GPU span, at least 0: a lower bound on the
    share of the step the GPU was busy (the work still queued when the host finished runs without gaps).
    None where the steps carry no host time (the CPU, or a record from before it was measured)."""
    shares = [max(0.0, (s.total_ms - s.host_ms) / s.total_ms) for s in steps if s.host_ms is not None and s.total_ms > 0]
    return statistics.median(shares) if shares else None


def with_job_fields(summary: Summary, world: int, steps: list[Step], comm_free_ms: list[float] | None,
                    comm_steps: dict[str, list] | None = None) -> Summary:
    """The data-parallel figures: communication share, exposed communication, the slowest ranks.

    The exposed communication is the quiet step against the same step without the all-reduce; the time
    in collectives comes from the steps timed with the hook (`comm_steps`), whose own cost is reported."""
    comms = list((comm_steps or {}).get("comm_ms") or [s.comm_ms for s in steps])
    comm = summarize(comms) if comms and all(c is not None for c in comms) else None
    timed = (comm_steps or {}).get("total_ms") or []
    timed_ms = statistics.median(timed) if timed else None
    slowest: dict[str, int] = {}
    for s in steps:
        if s.rank is not None:
            slowest[str(s.rank)] = slowest.get(str(s.rank), 0) + 1
    free = statistics.median(comm_free_ms) if comm_free_ms else None
    exposed = summary.total_ms.median - free if free is not None else None
    hidden = None
    if comm is not None and exposed is not None and comm.median > 0:
        hidden = min(1.0, max(0.0, 1 - exposed / comm.median))
    return replace(summary, world_size=world,
                   comm_ms=comm, comm_share=comm.mean / (statistics.fmean(timed) if timed else summary.total_ms.mean)
                   if comm else None,
                   comm_timed_ms=timed_ms,
                   comm_timer_cost=timed_ms / summary.total_ms.median if timed_ms else None,
                   comm_free_ms=free, exposed_comm_ms=exposed, comm_hidden_share=hidden,
                   slowest_rank=slowest or None)

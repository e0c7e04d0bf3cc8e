"""RunRecord: one run as it was measured, built by folding the worker's events in order.

The console, the headless CLI and the tests all build records with `RunRecord.apply`, so what they
show is the same. Steps that arrived are never dropped: a crash, an OOM or a cancel ends the record
with the steps so far and a summary computed from them.
"""
from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.settings import RunSpec
from perfconsole.core.stats import Stat
from perfconsole.core.run_summary import (Summary, between_processes, compute_summary, refit_intervals, with_job_fields,
                                          with_nvml_busy)

STATUSES = ("pending", "running", "ok", "oom", "error", "cancelled", "imported", "unsupported")


@dataclass
class Profile:
    profiler: str                                   # nsys | torch | import
    files: list[str]
    tables: dict[str, list[dict[str, Any]]]
    warnings: list[str] = field(default_factory=list)
    overhead: dict[str, Any] | None = None          # ev.ProfileOverhead's fields, where the run measured it
    seconds: dict[str, float] = field(default_factory=dict)  # the pass's own: steps, trace, tables (ev.ProfileReady)

    def to_dict(self) -> dict[str, Any]:
        return {"profiler": self.profiler, "files": self.files, "tables": self.tables,
                "warnings": self.warnings, "overhead": self.overhead, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Profile:
        return cls(d["profiler"], list(d.get("files", [])), dict(d.get("tables", {})),
                   list(d.get("warnings", [])), d.get("overhead"), dict(d.get("seconds") or {}))


@dataclass
class MemoryInfo:
    peak_allocated_mib: float
    peak_reserved_mib: float
    per_phase: dict[str, dict[str, float]] = field(default_factory=dict)
    snapshot_path: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    alloc_retries: int | None = None  # core.events.Memory: the allocator's retries in the measured steps

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Replicate:
    """One process of a repeated run: its own steps and the summary its worker computed."""
    index: int
    status: str = "running"
    warmup_steps: list[ev.Step] = field(default_factory=list)
    steps: list[ev.Step] = field(default_factory=list)
    summary: Summary | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "status": self.status,
                "warmup_steps": [_step_dict(s) for s in self.warmup_steps],
                "steps": [_step_dict(s) for s in self.steps],
                "summary": self.summary.to_dict() if self.summary else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Replicate:
        return cls(d["index"], d.get("status", "ok"), [ev.Step(**s) for s in d.get("warmup_steps", [])],
                   [ev.Step(**s) for s in d.get("steps", [])],
                   Summary.from_dict(d["summary"]) if d.get("summary") else None)


@dataclass
class RankRecord:
    """One rank of a data-parallel job: its own steps (with comm_ms) and a summary of them, per process."""
    rank: int
    warmup_steps: list[ev.Step] = field(default_factory=list)
    steps: list[ev.Step] = field(default_factory=list)
    summary: Summary | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "warmup_steps": [_step_dict(s) for s in self.warmup_steps],
                "steps": [_step_dict(s) for s in self.steps],
                "summary": self.summary.to_dict() if self.summary else None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RankRecord:
        return cls(d["rank"], [ev.Step(**s) for s in d.get("warmup_steps", [])],
                   [ev.Step(**s) for s in d.get("steps", [])],
                   Summary.from_dict(d["summary"]) if d.get("summary") else None)


def new_id() -> str:
    return dt.datetime.now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


@dataclass
class RunRecord:
    spec: RunSpec
    id: str = field(default_factory=new_id)
    name: str = ""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "pending"
    environment: dict[str, Any] = field(default_factory=dict)
    warmup_steps: list[ev.Step] = field(default_factory=list)
    steps: list[ev.Step] = field(default_factory=list)
    summary: Summary | None = None
    memory: MemoryInfo | None = None
    profile: Profile | None = None
    telemetry: dict[str, Any] | None = None         # core.telemetry.recorder.Telemetry.to_dict()
    error: ev.Error | None = None
    stage: str = ""
    overhead: dict[str, Any] | None = None          # held until the profile's tables arrive
    # With --repeat N: every process's own steps. The top-level steps pool all of them (in order),
    # and the top-level summary is computed over the pool, with `between_processes` beside it.
    replicates: list[Replicate] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    peaks: dict[str, Any] | None = None             # ev.Peaks: what the speed of light is measured against
    # Data-parallel jobs: every rank's steps; the top-level steps are the slowest rank's, per step.
    ranks: list[RankRecord] = field(default_factory=list)
    comm_free_ms: list[float] | None = None         # ev.CommFree: job steps without the all-reduce
    comm_steps: dict[str, list] | None = None       # ev.CommSteps: {total_ms, comm_ms}, steps with the comm timer on
    collectives: dict[str, Any] | None = None       # ev.Collectives: the step's all-reduces alone, the link
    overlap: list[dict[str, Any]] | None = None     # ev.Overlap: per rank, from the profile
    baseline: dict[str, Any] | None = None          # ev.Baseline: the one-process run (--scaling)
    model: dict[str, Any] | None = None             # ev.ModelReady: what the model is, and its FLOPs per step
    jobs: list[dict[str, Any]] = field(default_factory=list)  # ev.Placed: each process's Slurm job
    # ev.Provenance: each process whose steps are the headline, as it read itself right after them (the profiler
    # it names must be None; the capture's own is profile.overhead's `provenance`: core.measure.provenance).
    provenance: list[dict[str, Any]] = field(default_factory=list)
    host: list[dict[str, Any]] = field(default_factory=list)  # ev.HostTime: each such process's host, its steps'
    start: dict[str, float] | None = None           # ev.StartPhases: seconds per start phase, the first process's
    compile_cache: str | None = None                # ev.StartPhases: the first process's cache verdict

    kind = "run"

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.spec.label()

    @property
    def finished(self) -> bool:
        return self.status not in ("pending", "running")

    def apply(self, event: ev.Event) -> None:
        """Fold one event into the record."""
        rep = self.replicates[-1] if self.replicates else None
        if isinstance(event, ev.Replicate):
            if rep is not None and rep.status == "running":
                rep.status = "ok"
            self.replicates.append(Replicate(event.index))
        elif isinstance(event, ev.RunStarted):
            self.status = "running"
            self.environment = self.environment or dict(event.environment)  # the first process's
        elif isinstance(event, ev.Progress):
            self.stage = event.stage if not event.detail else f"{event.stage}: {event.detail}"
        elif isinstance(event, ev.Step):
            if rep is not None:
                (rep.warmup_steps if event.warmup else rep.steps).append(event)
                if event.warmup and rep.index > 0:
                    return  # the top-level warm-up steps are the first process's
            (self.warmup_steps if event.warmup else self.steps).append(event)
        elif isinstance(event, ev.SummaryReady):
            if rep is not None:
                rep.summary = Summary.from_dict(event.summary)
            else:
                self.summary = with_nvml_busy(Summary.from_dict(event.summary), self.telemetry)
        elif isinstance(event, ev.Memory):
            self.memory = MemoryInfo(event.peak_allocated_mib, event.peak_reserved_mib,
                                     dict(event.per_phase), event.snapshot_path, dict(event.details),
                                     event.alloc_retries)
        elif isinstance(event, ev.ProfileReady) and event.profiler == "ncu" and self.profile is not None:
            self.profile.tables.update(event.tables)  # ncu's why beside the kernels' times (core.launch.ncu_launch)
            self.profile.files += list(event.files)
            self.profile.warnings += list(event.warnings)
        elif isinstance(event, ev.ProfileReady):
            self.profile = Profile(event.profiler, list(event.files), dict(event.tables), list(event.warnings),
                                   seconds=dict(event.seconds))
            self.profile.overhead = _with_kernel_count(self.overhead, self.profile.tables, _one_stream(self.spec))
        elif isinstance(event, ev.ProfileOverhead):
            self.overhead = asdict(event)
            if self.profile is not None:
                self.profile.overhead = _with_kernel_count(self.overhead, self.profile.tables, _one_stream(self.spec))
        elif isinstance(event, ev.Peaks):
            self.peaks = dict(event.peaks)
        elif isinstance(event, ev.RankSteps):
            for d in event.steps:
                while len(self.ranks) <= d["rank"]:
                    self.ranks.append(RankRecord(len(self.ranks)))
                r = self.ranks[d["rank"]]
                (r.warmup_steps if event.warmup else r.steps).append(ev.Step(**d))
        elif isinstance(event, ev.CommFree):
            self.comm_free_ms = list(event.total_ms)
        elif isinstance(event, ev.CommSteps):
            self.comm_steps = {"total_ms": list(event.total_ms), "comm_ms": list(event.comm_ms)}
        elif isinstance(event, ev.Collectives):
            self.collectives = dict(event.data)
        elif isinstance(event, ev.Overlap):
            self.overlap = [dict(r) for r in event.ranks]
        elif isinstance(event, ev.Baseline):
            self.baseline = {"status": event.status, "summary": event.summary,
                             **({"source": event.source} if event.source else {})}
        elif isinstance(event, ev.ModelReady):
            self.model = self.model or dict(event.info)  # the first process's: every replicate builds the same
        elif isinstance(event, ev.Telemetry):
            self.telemetry = dict(event.data)
            self.summary = with_nvml_busy(self.summary, self.telemetry)
        elif isinstance(event, ev.StartPhases):
            if self.start is None:
                self.start, self.compile_cache = dict(event.phases), event.compile_cache
        elif isinstance(event, ev.Provenance):
            self.provenance.append(asdict(event))
        elif isinstance(event, ev.HostTime):
            self.host.append(asdict(event))
        elif isinstance(event, ev.Placed):
            self.jobs.append(asdict(event))
        elif isinstance(event, ev.Error):
            self.error = event
            if event.kind == "profiler" and self.profile is None:
                self.log.append(f"profiler: {event.message}")
        elif isinstance(event, ev.Finished):
            self.status = event.status
            if rep is not None:
                rep.status = event.status if rep.status == "running" else rep.status
                self.summary = self.recompute_summary()
            elif self.summary is None:
                self.summary = self.recompute_summary()
            self._finish_job()
            self.stage = ""

    def _finish_job(self) -> None:
        """Each rank's own summary, and the weak-scaling efficiency against the one-process run."""
        one = replace(self.spec, nproc=1, parallel="none")
        for r in self.ranks:
            s = compute_summary(one, r.steps, r.warmup_steps, self.environment.get("gpu_name"), self.spec.peak_tflops,
                                model=self.model)
            r.summary = with_job_fields(s, 1, r.steps, None) if s is not None else None
        ranks = [r.summary for r in self.ranks if r.summary is not None]
        if self.summary is not None and not self.summary.between_processes and len(ranks) >= 2:
            self.summary = replace(self.summary, between_processes=between_processes(ranks), processes=len(ranks))
        base = (self.baseline or {}).get("summary")
        if self.summary is not None and base and (self.baseline or {}).get("status") == "ok":
            single = Summary.from_dict(base).total_ms.median
            ci = efficiency_interval(single, (self.summary.between_processes or {}).get("total_ms"))
            self.summary = replace(self.summary, single_process_ms=single,
                                   scaling_efficiency=single / self.summary.total_ms.median, scaling_efficiency_ci95=ci)

    def recompute_summary(self) -> Summary | None:
        mem = self.memory
        pooled = compute_summary(self.spec, self.steps, self.warmup_steps,
                                 self.environment.get("gpu_name"), self.spec.peak_tflops,
                                 mem.peak_allocated_mib if mem else None,
                                 mem.peak_reserved_mib if mem else None, self.peaks,
                                 _busy(self.overhead or (self.profile.overhead if self.profile else None)),
                                 self.comm_free_ms, self.comm_steps, self.model)
        pooled = with_nvml_busy(pooled, self.telemetry)
        if pooled is None or not self.replicates:
            return pooled
        whole = [r.summary for r in self.replicates if r.status == "ok" and r.summary is not None]
        return replace(pooled, processes=len([r for r in self.replicates if r.steps]),
                       between_processes=between_processes(whole))

    # --- snapshot form -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "created": self.created, "status": self.status,
            "spec": self.spec.to_dict(), "environment": self.environment,
            "warmup_steps": [_step_dict(s) for s in self.warmup_steps],
            "steps": [_step_dict(s) for s in self.steps],
            "summary": self.summary.to_dict() if self.summary else None,
            "memory": self.memory.to_dict() if self.memory else None,
            "profile": self.profile.to_dict() if self.profile else None,
            "telemetry": self.telemetry,
            "replicates": [r.to_dict() for r in self.replicates],
            "error": _error_dict(self.error),
            "peaks": self.peaks,
            "world_size": self.spec.nproc, "parallel": self.spec.parallel,
            "ranks": [r.to_dict() for r in self.ranks], "comm_free_ms": self.comm_free_ms,
            "comm_steps": self.comm_steps, "collectives": self.collectives,
            "overlap": self.overlap, "baseline": self.baseline, "model": self.model,
            "jobs": self.jobs, "provenance": self.provenance, "host": self.host,
            "start": self.start, "compile_cache": self.compile_cache,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunRecord:
        r = cls._from_dict(d)
        r.summary = with_nvml_busy(r.summary, r.telemetry)  # a record saved when the events were the only figure
        for part in [*r.replicates, *r.ranks]:  # saved before intervals were the median's: recomputed from the steps
            part.summary = refit_intervals(part.summary, part.steps, [])
        processes = ([p.summary for p in r.replicates if p.status == "ok"] if r.replicates
                     else [p.summary for p in r.ranks])
        sm = r.summary = refit_intervals(r.summary, r.steps, [s for s in processes if s is not None])
        saved = ((d.get("summary") or {}).get("between_processes") or {}).get("total_ms")
        if sm is not None and sm.single_process_ms and saved is not None and "ci95_of" not in saved:
            r.summary = replace(sm, scaling_efficiency_ci95=efficiency_interval(
                sm.single_process_ms, (sm.between_processes or {}).get("total_ms")))  # over the refit interval
        p = r.profile
        if p is not None and p.overhead and "kernel_ms_per_step" not in p.overhead:  # saved before it was summed
            p.overhead = _with_kernel_count(p.overhead, p.tables, _one_stream(r.spec))
        return r

    @classmethod
    def _from_dict(cls, d: dict[str, Any]) -> RunRecord:
        err = d.get("error")
        return cls(
            spec=RunSpec.from_dict(d["spec"]), id=d["id"], name=d.get("name", ""),
            created=d.get("created", ""), status=d["status"], environment=d.get("environment", {}),
            warmup_steps=[ev.Step(**s) for s in d.get("warmup_steps", [])],
            steps=[ev.Step(**s) for s in d.get("steps", [])],
            summary=Summary.from_dict(d["summary"]) if d.get("summary") else None,
            memory=MemoryInfo(**d["memory"]) if d.get("memory") else None,
            profile=Profile.from_dict(d["profile"]) if d.get("profile") else None,
            telemetry=d.get("telemetry"),
            replicates=[Replicate.from_dict(r) for r in d.get("replicates", [])],
            error=ev.Error(**err) if err else None, peaks=d.get("peaks"),
            ranks=[RankRecord.from_dict(r) for r in d.get("ranks", [])],
            comm_free_ms=d.get("comm_free_ms"), comm_steps=d.get("comm_steps"), overlap=d.get("overlap"),
            collectives=d.get("collectives"),
            baseline=d.get("baseline"), model=d.get("model"), jobs=list(d.get("jobs", [])),
            provenance=list(d.get("provenance", [])), host=list(d.get("host") or []), start=d.get("start"),
            compile_cache=d.get("compile_cache"),
        )


def efficiency_interval(single_ms: float, spread: Stat | None) -> list[float] | None:
    """Weak-scaling efficiency (one process's median step over the job's) at the ends of the interval between
    the ranks' (or processes') medians; None where that has no interval (fewer than six)."""
    if spread is None or not spread.ci95_low or not spread.ci95_high:
        return None
    return [single_ms / spread.ci95_high, single_ms / spread.ci95_low]


def _busy(overhead: dict[str, Any] | None) -> float | None:
    return (overhead or {}).get("gpu_busy_share")


def _one_stream(spec: RunSpec) -> bool:
    """A one-process CUDA run: its kernels run one at a time, so they cannot sum to more than the step. A
    data-parallel rank overlaps NCCL with compute on a second stream, and CPU ops run on several threads."""
    return spec.device == "cuda" and spec.nproc == 1


def _with_kernel_count(overhead: dict[str, Any] | None, tables: dict[str, list[dict[str, Any]]],
                       one_stream: bool) -> dict[str, Any] | None:
    """The overhead with the profiled steps' kernels per step, counted from the kernel table, and where they
    run on one stream their summed time per step (see `_one_stream`)."""
    if overhead is None:
        return None
    rows = tables.get("cuda_gpu_kern_sum") or []
    launched = sum(int(r.get("instances") or 0) for r in rows)
    steps = overhead.get("profiled_steps") or 0
    kernel_ns = sum(float(r.get("total_time_ns") or 0) for r in rows)
    return {**overhead, "kernels_per_step": round(launched / steps, 1) if launched and steps else None,
            "kernel_ms_per_step": kernel_ns / steps / 1e6 if one_stream and kernel_ns and steps else None}


def _step_dict(s: ev.Step) -> dict[str, Any]:
    d = {"index": s.index, "warmup": s.warmup, "total_ms": s.total_ms, "forward_ms": s.forward_ms,
         "backward_ms": s.backward_ms, "optimizer_ms": s.optimizer_ms, "loss": s.loss, "host_ms": s.host_ms,
         "host_forward_ms": s.host_forward_ms, "host_backward_ms": s.host_backward_ms}
    if s.rank is not None:  # a data-parallel step; one-process steps keep their old form
        d.update(comm_ms=s.comm_ms, rank=s.rank)
    return d


def _error_dict(e: ev.Error | None) -> dict[str, Any] | None:
    return None if e is None else {"kind": e.kind, "message": e.message, "detail": e.detail}

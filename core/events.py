"""The worker's event stream: versioned JSON lines, one event per line on the child's stdout.

Every line is `{"v": 1, "type": <name>, ...fields}`. The same stream feeds the console, the headless
CLI (`--json`) and the tests. Decoding is strict about the version and the type, and tolerant of
fields it does not know (a newer worker may add some).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

EVENT_VERSION = 1


class EventError(ValueError):
    """A line that is not a valid event."""


@dataclass(frozen=True)
class Event:
    type: ClassVar[str] = ""

    def to_json(self) -> str:
        return json.dumps({"v": EVENT_VERSION, "type": self.type, **asdict(self)}, allow_nan=False, default=_rows)


def _rows(value: object) -> list:
    """A profile table held as a frame (core.profiling.table.ProfileTable, a Sequence of row dicts) is
    written as its rows: the one place an event's tables become rows."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


@dataclass(frozen=True)
class RunStarted(Event):
    type: ClassVar[str] = "run_started"
    spec: dict[str, Any]
    environment: dict[str, Any]
    pid: int


@dataclass(frozen=True)
class Progress(Event):
    """A stage of the run began: building, compiling, warmup, measuring, profiling, ..."""
    type: ClassVar[str] = "progress"
    stage: str
    detail: str = ""


@dataclass(frozen=True)
class Step(Event):
    """One timed step, in milliseconds. Phases the mode lacks are None."""
    type: ClassVar[str] = "step"
    index: int
    warmup: bool
    total_ms: float
    forward_ms: float
    backward_ms: float | None = None
    optimizer_ms: float | None = None
    # The step's loss, read after the step's own synchronisation (no extra sync), for numerics checks.
    loss: float | None = None
    # Host time to issue the step (CUDA only): the events' GPU span against it bounds how busy the GPU was.
    host_ms: float | None = None
    # Host time to issue the forward (CUDA only). A timed forward whose kernels fall short of it while the
    # host was still issuing it for as long was paced by the host (core.profiling.attribution).
    host_forward_ms: float | None = None
    # Host time to issue the backward (CUDA only, from the call of backward() until autograd has queued all
    # of it): the same reading for the backward.
    host_backward_ms: float | None = None
    # Data-parallel runs only: the time in collectives (core.measure.data_parallel) and, for the job's
    # step, the rank it came from (the slowest rank of that step).
    comm_ms: float | None = None
    rank: int | None = None


@dataclass(frozen=True)
class SummaryReady(Event):
    type: ClassVar[str] = "summary"
    summary: dict[str, Any]


@dataclass(frozen=True)
class Memory(Event):
    """Peak memory in MiB, for the whole measured run and per phase where known."""
    type: ClassVar[str] = "memory"
    peak_allocated_mib: float
    peak_reserved_mib: float
    per_phase: dict[str, dict[str, float]] = field(default_factory=dict)
    snapshot_path: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # Times the caching allocator found no cached block, freed its cache and asked CUDA again during the
    # measured steps (torch's num_alloc_retries; a job: its busiest rank). Each retry synchronises the
    # device, so the steps that hit one are slower than the program's steps with room to spare.
    alloc_retries: int | None = None


@dataclass(frozen=True)
class ProfileReady(Event):
    """Profiler output is on disk: `tables` maps report name to rows; `files` lists what was kept; `seconds`, where
    the worker profiled in its own process (the torch profiler), what the pass took: steps, trace, tables
    (core.measure.profile_pass)."""
    type: ClassVar[str] = "profile_ready"
    profiler: str
    files: list[str]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    # What the profiler's output lacks, in words (nsys: a report it SKIPPED, such as nvtx_sum when the capture
    # holds no NVTX range); the record keeps them as profile.warnings.
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProfileOverhead(Event):
    """What profiling cost: the same process's quiet measured steps against its profiled ones (ms, medians).

    `ratio` is profiled / quiet step time; kernel counts per step are None where they are not known.
    """
    type: ClassVar[str] = "profile_overhead"
    profiler: str
    quiet_ms: float
    profiled_ms: float
    ratio: float
    quiet_steps: int
    profiled_steps: int
    profiled_step_ms: list[float] = field(default_factory=list)
    kernels_per_step: float | None = None
    quiet_kernels_per_step: float | None = None
    # Union of GPU kernel (and copy) intervals over the profiled steps / their summed step time.
    gpu_busy_share: float | None = None
    # The profiled steps' own timed phases (median ms per step): the figures their kernels are held
    # against, since the profiler's cost moves a phase's time as well as the step's.
    profiled_phase_ms: dict[str, float] | None = None
    # The host's time to issue the forward in the profiled steps (CUDA only; mean ms per step, as nsys's range
    # total per step is): the profiler's forward range, a host interval too, is held against it.
    profiled_host_forward_ms: float | None = None
    # Where the profiler ran in a process of its own (nsys: core.launch.profiled), the run's headline is a plain
    # process of the same spec: its median step and step count, and this process's quiet steps (its measured
    # steps before the capture), whose median `quiet_ms` is, against `plain_ms`, what the profiler cost outside it.
    plain_ms: float | None = None
    plain_steps: int | None = None
    quiet_step_ms: list[float] = field(default_factory=list)
    # Each plain process's own median step: their spread says how far one process's figure can be trusted.
    plain_process_ms: list[float] = field(default_factory=list)
    # The profiled process as it read itself during its profiled steps (core.measure.provenance): the profiler
    # it names is the one the capture ran under.
    provenance: dict[str, Any] | None = None


@dataclass(frozen=True)
class Provenance(Event):
    """The process whose measured steps were just timed, as it read itself right after them
    (core.measure.provenance): the profiler its variables, its mapped libraries and the torch profiler's state
    name (None: no profiler), with each sign of it."""
    type: ClassVar[str] = "provenance"
    pid: int
    profiler: str | None
    signs: list[str] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)
    libraries: list[str] = field(default_factory=list)
    source: str = ""


@dataclass(frozen=True)
class HostTime(Event):
    """The host under the measured steps, as the thread that issued them saw it (core.measure.host_time): its CPU
    seconds against the wall's, its context switches, the hypervisor's steal share of the machine's CPUs and of the
    CPU it started on, the CPUs it ran on at the start and end, and how many it may run on."""
    type: ClassVar[str] = "host_time"
    pid: int
    wall_s: float
    thread_cpu_s: float
    voluntary_switches: int | None = None
    involuntary_switches: int | None = None
    steal_share: float | None = None
    cpu_steal_share: float | None = None
    cpus: list[int | None] = field(default_factory=list)
    allowed_cpus: int | None = None


@dataclass(frozen=True)
class Peaks(Event):
    """The device's peaks the run's speed of light uses (core.flops.Peaks' fields)."""
    type: ClassVar[str] = "peaks"
    peaks: dict[str, Any]


@dataclass(frozen=True)
class Replicate(Event):
    """The next replicate process of a repeated run begins (0-based `index` of `of`); the parent says so."""
    type: ClassVar[str] = "replicate"
    index: int
    of: int


@dataclass(frozen=True)
class Telemetry(Event):
    """GPU telemetry sampled through NVML during the measured steps (core.telemetry.recorder's to_dict)."""
    type: ClassVar[str] = "telemetry"
    data: dict[str, Any]


@dataclass(frozen=True)
class RankSteps(Event):
    """One step of a data-parallel job on every rank (`steps[r]` is rank r's Step fields), from rank 0."""
    type: ClassVar[str] = "rank_steps"
    index: int
    warmup: bool
    steps: list[dict[str, Any]]


@dataclass(frozen=True)
class CommFree(Event):
    """DDP steps run again without the gradient all-reduce (`no_sync`): the job's step time per step
    (slowest rank) when no communication is waited for, to price the exposed communication."""
    type: ClassVar[str] = "comm_free"
    total_ms: list[float]


@dataclass(frozen=True)
class CommSteps(Event):
    """DDP steps run after the quiet ones with the communication timer on (a hook that marks every
    bucket's all-reduce): the job's step (slowest rank) and that rank's time in collectives, per step.
    Kept apart from the quiet steps because the timer's events and callbacks change the overlap."""
    type: ClassVar[str] = "comm_steps"
    total_ms: list[float]
    comm_ms: list[float | None]


@dataclass(frozen=True)
class Collectives(Event):
    """DDP only, after the quiet steps: the step's bucket all-reduces run alone, and the link's bus
    bandwidth (core.measure.collectives.measure's figures)."""
    type: ClassVar[str] = "collectives"
    data: dict[str, Any]


@dataclass(frozen=True)
class Overlap(Event):
    """Per rank, from the profile's kernel intervals: communication kernel time and how much of it ran
    while another kernel ran on the same GPU (core.profiling.overlap's to_dict)."""
    type: ClassVar[str] = "overlap"
    ranks: list[dict[str, Any]]


@dataclass(frozen=True)
class Baseline(Event):
    """The one-process run of the same spec (`--scaling`), for weak-scaling efficiency: its summary."""
    type: ClassVar[str] = "baseline"
    status: str
    summary: dict[str, Any] | None
    source: str | None = None   # where it was measured, when not just before the job (a ladder's earlier rung)


@dataclass(frozen=True)
class ModelReady(Event):
    """What the measured model is (model.sources.ModelInfo's fields) and its FLOPs per step, counted or from
    the formula (core.measure.model_build): forward_flops, backward_flops, flops_source, attention_flops."""
    type: ClassVar[str] = "model"
    info: dict[str, Any]


@dataclass(frozen=True)
class StartPhases(Event):
    """Where the worker's start went (core.measure.start): seconds per phase, in the order they ran, from the
    process's start to its first measured step: imports, peaks, build, flops, each converter, compile, first step,
    rest of warm-up."""
    type: ClassVar[str] = "start"
    phases: dict[str, float]
    # torch.compile's cache (core.measure.compile_cache): hit | miss | partial, then AOTAutograd's counts after a
    # `;` where it bypassed its cache, or missed beside a `hit`; None without a compile.
    compile_cache: str | None = None


# The progress stage of a worker started ahead of its turn once it is ready to run (worker.hold);
# the launcher consumes it, so consumers of Launch.events() never see it.
HELD = "held"

ERROR_KINDS = ("oom", "cuda", "spec", "crash", "cancelled", "profiler", "unsupported")


@dataclass(frozen=True)
class Error(Event):
    type: ClassVar[str] = "error"
    kind: str
    message: str
    detail: str = ""

    def text(self) -> str:
        """`kind: message` in one line, the kind said once (an unsupported run's message already starts with it)."""
        return self.message if self.message.startswith(f"{self.kind}:") else f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class Placed(Event):
    """Where a process ran when a scheduler placed it (core.launch.slurm): the job, its node(s) and
    GPUs, Slurm's final state and reason, the seconds it queued and ran (from sacct), and the time limit
    it asked for and whose that was."""
    type: ClassVar[str] = "placed"
    executor: str
    job_id: str
    state: str
    nodes: list[str] = field(default_factory=list)
    gpus: str | None = None
    reason: str | None = None
    queued_s: float | None = None
    ran_s: float | None = None
    log: str | None = None
    time_limit: str | None = None        # what the job asked for, in Slurm's format
    time_limit_from: str | None = None   # whose: --slurm-time, a config file, the partition's, perfconsole's


@dataclass(frozen=True)
class Paired(Event):
    """An event of one of the two programs a paired worker runs in one process (core.measure.paired): `program`
    0 or 1, and that program's own event (a step, its summary) as its JSON object."""
    type: ClassVar[str] = "paired"
    program: int
    event: dict[str, Any]

    def inner(self) -> Event:
        return from_obj(self.event)


@dataclass(frozen=True)
class Finished(Event):
    """The last event of a run: status ok | oom | error | cancelled | unsupported."""
    type: ClassVar[str] = "finished"
    status: str


_TYPES: dict[str, type[Event]] = {
    cls.type: cls for cls in (RunStarted, Progress, Step, SummaryReady, Memory, ProfileReady,
                               ProfileOverhead, Telemetry, Replicate, Error, Finished, Peaks, RankSteps, CommFree,
                               CommSteps, Collectives, Overlap, Baseline, ModelReady, Placed, Provenance, Paired,
                               StartPhases, HostTime)
}


def decode(line: str) -> Event:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EventError(f"not JSON: {line[:120]!r}") from exc
    return from_obj(obj)


def from_obj(obj: Any) -> Event:
    """The event a decoded JSON object holds."""
    if not isinstance(obj, dict):
        raise EventError(f"not an event object: {str(obj)[:120]!r}")
    if obj.get("v") != EVENT_VERSION:
        raise EventError(f"event version {obj.get('v')!r} is not {EVENT_VERSION}")
    cls = _TYPES.get(obj.get("type", ""))
    if cls is None:
        raise EventError(f"unknown event type {obj.get('type')!r}")
    names = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in obj.items() if k in names})
    except TypeError as exc:
        raise EventError(f"bad {cls.type} event: {exc}") from exc

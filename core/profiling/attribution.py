"""Which phase each kernel's time belongs to, and how much belongs to none.

A capture's kernel table (cuda_gpu_kern_sum) holds every kernel of the measured steps; the NVTX-kernel
projection (nvtx_kern_sum) holds the kernels launched inside each range. Kernel time in no phase range
is time the phase table cannot explain; on CUDA it was most of the backward pass until the backward
range was also opened on autograd's own thread (see perfconsole.core.measure.bench). The record says
that share in figures rather than hide it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfconsole.core.profiling.analyses import PHASES, Source, column, exact_sum
from perfconsole.core.profiling.table import TableFrames, frames_of

# The phase ranges as the worker names them -> the names of the timed phases.
PHASE_NAMES = {"forward": "forward", "backward": "backward", "optimizer_step": "optimizer"}


@dataclass(frozen=True)
class PhaseKernels:
    phase: str               # forward | backward | optimizer
    kernel_ms: float         # kernel time inside the phase's ranges, all captured steps together
    per_step_ms: float | None
    timed_ms: float | None   # the console's own timed phase (median per step), where known
    rel_diff: float | None   # per_step_ms against timed_ms
    host_ms: float | None = None  # the host's time to issue the phase (median per step), where known

    @property
    def pacing(self) -> str | None:
        """How far the host paced the phase, where its kernels fall short of the timed span (the GPU then sat
        with no kernel between them): "whole" when the host took as long to issue the phase as it lasted;
        "in part" when the GPU's wait fits inside the host's issue time and the host was nearly as busy as
        the GPU (a 2.7B bf16 eager forward on an H200: 49.0 ms of kernels, 44.8 ms of issue, 55.0 ms timed:
        the small ops' launches outpace their kernels and the GPU drains its queue between them). On one
        stream the GPU can wait only while the host is still issuing, so a wait longer than the issue time
        is left unexplained (None), as is a phase whose host time is unknown."""
        if self.rel_diff is None or self.rel_diff >= 0 or self.host_ms is None or self.timed_ms is None:
            return None
        if self.host_ms >= HOST_PACED * self.timed_ms:
            return "whole"
        waited = self.timed_ms - (self.per_step_ms or 0.0)
        if WAIT_SHARE * self.timed_ms < waited <= self.host_ms and self.host_ms >= HOST_BUSY * (self.per_step_ms or 0.0):
            return "in part"
        return None

    @property
    def host_paced(self) -> bool:
        return self.pacing is not None


# A phase the host issued in at least this share of its timed span was paced by the host.
HOST_PACED = 0.95
# Paced in part: the GPU waited more than this share of the phase, and the host's issue took at least this
# share of the phase's kernel time.
WAIT_SHARE = 0.05
HOST_BUSY = 0.8


@dataclass(frozen=True)
class Attribution:
    total_kernel_ms: float
    phases: list[PhaseKernels]
    unattributed_ms: float
    unattributed_share: float  # a fraction of total_kernel_ms
    steps: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"total_kernel_ms": round(self.total_kernel_ms, 3), "steps": self.steps,
                "phases": {p.phase: {"kernel_ms": round(p.kernel_ms, 3),
                                     "per_step_ms": None if p.per_step_ms is None else round(p.per_step_ms, 3),
                                     "timed_ms": None if p.timed_ms is None else round(p.timed_ms, 3),
                                     "rel_diff": None if p.rel_diff is None else round(p.rel_diff, 4),
                                     "host_ms": None if p.host_ms is None else round(p.host_ms, 3),
                                     "host_paced": p.host_paced, "host_pacing": p.pacing}
                           for p in self.phases},
                "unattributed_ms": round(self.unattributed_ms, 3),
                "unattributed_share": round(self.unattributed_share, 4)}


def _phase_ns(frames: TableFrames, range_name: str) -> int:
    # One row per kernel and per thread that opened the range: autograd's thread and the main thread
    # both open `backward`, and a kernel launched on one is inside that thread's range only.
    frame = frames.frame("nvtx_kern_sum")
    if frame is None or "range" not in frame.columns:
        return 0
    rows = frame[(frame["range"] == range_name).fillna(False).to_numpy(dtype=bool)]
    return _ns_sum(rows)


def _ns_sum(frame: Any) -> int:
    """sum(int(r.get("total_time_ns") or 0) for r in rows)"""
    totals = column(frame, "total_time_ns")
    if totals.dtype == object or totals.dtype.kind == "f":
        return sum(int(v or 0) for v in totals.tolist())
    return exact_sum(totals)


def attribute(tables: Source, steps: int | None = None,
              timed_ms: Mapping[str, float | None] | None = None,
              host_ms: Mapping[str, float | None] | None = None) -> Attribution | None:
    """Kernel time per phase against all kernel time; None without a kernel table or phase ranges.

    `timed_ms` maps forward/backward/optimizer to the console's median timed phase per step, `host_ms` to
    the host's median time to issue it (the forward's and the backward's are recorded).
    """
    frames = frames_of(tables)
    kernels = frames.frame("cuda_gpu_kern_sum")
    total_ns = _ns_sum(kernels) if kernels is not None else 0
    if total_ns <= 0 or not frames.has("nvtx_kern_sum"):
        return None
    phases = []
    in_phases = 0
    for range_name in PHASES:
        ns = _phase_ns(frames, range_name)
        name = PHASE_NAMES[range_name]
        timed = (timed_ms or {}).get(name)
        if ns == 0 and timed is None:
            continue
        in_phases += ns
        per_step = ns / 1e6 / steps if steps else None
        rel = (per_step - timed) / timed if per_step is not None and timed else None
        phases.append(PhaseKernels(name, ns / 1e6, per_step, timed, rel, (host_ms or {}).get(name)))
    left = max(total_ns - in_phases, 0)
    return Attribution(total_ns / 1e6, phases, left / 1e6, left / total_ns, steps)

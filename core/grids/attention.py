"""The attention benchmark: a d x seq grid of causal attention, eager against compiled against SDPA.

Every cell runs in its own child process (`perfconsole.core.grids.attention_worker`), so an OOM marks the
cell `oom`, the GPU gets its memory back and the grid goes on. Cells run variant by variant, each
variant's cells from small to large. `--compile` adds a torch.compile'd naive variant: SDPA is
already one fused kernel, compiling it measures nothing new.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.grids.cell_runner import CellRunner
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import new_id
from perfconsole.core.settings import DEVICES, PRECISIONS, RunSpec, SpecError
from perfconsole.core.settings.rules import choice as _choice
from perfconsole.core.settings.rules import int_range as _int_range
from perfconsole.core.stats import Stat

IMPLS = ("naive", "sdpa")


@dataclass(frozen=True)
class AttentionCell:
    d: int
    seq: int
    batch: int = 8
    impl: str = "naive"
    compile: bool = False
    precision: str = "fp32"
    warmup: int = 10
    iters: int = 100
    device: str = "cuda"
    seed: int = 0

    @property
    def variant(self) -> str:
        return self.impl + ("+compile" if self.compile else "")

    def label(self) -> str:
        return f"{self.variant} d{self.d} seq{self.seq} b{self.batch} {self.precision}"

    def validate(self) -> AttentionCell:
        _choice("impl", self.impl, IMPLS)
        _choice("precision", self.precision, PRECISIONS)
        _choice("device", self.device, DEVICES)
        for name, lo, hi in (("d", 1, 1 << 16), ("seq", 1, 1 << 22), ("batch", 1, 1 << 16),
                             ("warmup", 0, 100_000), ("iters", 2, 100_000), ("seed", 0, 2**63 - 1)):
            _int_range(name, getattr(self, name), lo, hi)
        if not isinstance(self.compile, bool):
            raise SpecError("compile", f"must be true or false, not {self.compile!r}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttentionCell:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SpecError(unknown[0], f"unknown field; known fields: {', '.join(sorted(known))}")
        return cls(**d)


@dataclass(frozen=True)
class AttentionSpec:
    ds: tuple[int, ...]
    seqs: tuple[int, ...]
    batch: int = 8
    impls: tuple[str, ...] = IMPLS
    compile: bool = False
    precisions: tuple[str, ...] = ("fp32",)
    warmup: int = 10
    iters: int = 100
    device: str = "cuda"
    seed: int = 0

    def variants(self) -> list[tuple[str, bool]]:
        out = [(impl, False) for impl in self.impls]
        if self.compile and "naive" in self.impls:
            out.insert(self.impls.index("naive") + 1, ("naive", True))
        return out

    def cells(self) -> list[AttentionCell]:
        return [AttentionCell(d, s, self.batch, impl, comp, p, self.warmup, self.iters, self.device, self.seed)
                for p, (impl, comp), d, s in itertools.product(self.precisions, self.variants(),
                                                               sorted(self.ds), sorted(self.seqs))]

    def validate(self) -> AttentionSpec:
        for name in ("ds", "seqs", "impls", "precisions"):
            values = getattr(self, name)
            if not values:
                raise SpecError(name, "give at least one value")
            if len(set(values)) != len(values):
                raise SpecError(name, f"repeated value in {', '.join(map(str, values))}")
        if self.compile and "naive" not in self.impls:
            raise SpecError("compile", "compiles the naive implementation; add naive to --impl")
        for cell in self.cells():
            cell.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttentionSpec:
        d = dict(d)
        for k in ("ds", "seqs", "impls", "precisions"):
            d[k] = tuple(d[k])
        return cls(**d)


@dataclass
class AttentionResult:
    """One cell as measured, folded from the worker's events like a RunRecord."""
    cell: AttentionCell
    status: str = "pending"
    forward_ms: Stat | None = None
    backward_ms: Stat | None = None
    memory_before_backward_mib: float | None = None
    peak_allocated_mib: float | None = None
    error: str | None = None
    error_kind: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    stage: str = ""
    jobs: list[dict[str, Any]] = field(default_factory=list)  # ev.Placed: the Slurm job that ran it

    @property
    def finished(self) -> bool:
        return self.status not in ("pending", "running")

    @property
    def spec(self) -> AttentionCell:  # what a progress display labels
        return self.cell

    def apply(self, event: ev.Event) -> None:
        if isinstance(event, ev.RunStarted):
            self.status, self.environment = "running", dict(event.environment)
        elif isinstance(event, ev.Progress):
            self.stage = event.stage
        elif isinstance(event, ev.SummaryReady):
            s = event.summary
            self.forward_ms = _stat(s.get("forward_ms"))
            self.backward_ms = _stat(s.get("backward_ms"))
            self.memory_before_backward_mib = s.get("memory_before_backward_mib")
            self.peak_allocated_mib = s.get("peak_allocated_mib")
        elif isinstance(event, ev.Error):
            self.error, self.error_kind = event.message, event.kind
        elif isinstance(event, ev.Placed):
            self.jobs.append(asdict(event))
        elif isinstance(event, ev.Finished):
            self.status, self.stage = event.status, ""

    def to_dict(self) -> dict[str, Any]:
        return {"cell": self.cell.to_dict(), "status": self.status,
                "forward_ms": _stat_dict(self.forward_ms), "backward_ms": _stat_dict(self.backward_ms),
                "memory_before_backward_mib": self.memory_before_backward_mib,
                "peak_allocated_mib": self.peak_allocated_mib, "error": self.error,
                "error_kind": self.error_kind, "environment": self.environment, "jobs": self.jobs}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttentionResult:
        return cls(AttentionCell.from_dict(d["cell"]), d["status"], _stat(d.get("forward_ms")),
                   _stat(d.get("backward_ms")), d.get("memory_before_backward_mib"),
                   d.get("peak_allocated_mib"), d.get("error"), d.get("error_kind"), d.get("environment", {}),
                   jobs=list(d.get("jobs", [])))


def _stat_dict(s: Stat | None) -> dict[str, Any] | None:
    """JSON has no NaN: the interval of a single iteration is written as null."""
    return None if s is None else {k: (None if isinstance(v, float) and v != v else v)
                                   for k, v in s.to_dict().items()}


def _stat(d: dict[str, Any] | None) -> Stat | None:
    if not d:
        return None
    d = {k: (float("nan") if v is None else v) for k, v in d.items()}
    return Stat.from_dict(d)


@dataclass
class AttentionRecord:
    spec: AttentionSpec
    cells: list[AttentionResult]
    id: str = field(default_factory=new_id)
    name: str = ""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "pending"
    cell_seconds: list[float | None] = field(default_factory=list)
    cell_gpus: list[str | None] = field(default_factory=list)   # the GPU each cell ran on (--gpus)

    kind = "attention"

    def __post_init__(self) -> None:
        if not self.name:
            s = self.spec
            self.name = (f"attention {','.join(v + ('+compile' if c else '') for v, c in s.variants())} "
                         f"d {','.join(map(str, sorted(s.ds)))} seq {','.join(map(str, sorted(s.seqs)))} "
                         f"b{s.batch} {','.join(s.precisions)}")
        self.cell_seconds += [None] * (len(self.cells) - len(self.cell_seconds))

    @classmethod
    def new(cls, spec: AttentionSpec) -> AttentionRecord:
        return cls(spec, [AttentionResult(c) for c in spec.cells()])

    @property
    def environment(self) -> dict[str, Any]:
        return next((c.environment for c in self.cells if c.environment), {})

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created": self.created, "status": self.status,
                "spec": self.spec.to_dict(), "cells": [c.to_dict() for c in self.cells],
                "cell_seconds": self.cell_seconds, "cell_gpus": self.cell_gpus}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AttentionRecord:
        return cls(AttentionSpec.from_dict(d["spec"]), [AttentionResult.from_dict(c) for c in d["cells"]],
                   id=d["id"], name=d.get("name", ""), created=d.get("created", ""), status=d["status"],
                   cell_seconds=list(d.get("cell_seconds", [])), cell_gpus=list(d.get("cell_gpus", [])))


class AttentionLaunch(Launch):
    """A Launch of the attention worker: the same stream, cancel and clean-up, another argv."""

    def __init__(self, cell: AttentionCell, env: dict[str, str] | None = None, executor: Any = None) -> None:
        super().__init__(RunSpec(device="cpu"), env=env, executor=executor)
        self.cell = cell

    def command(self) -> list[str]:
        return [sys.executable, "-m", "perfconsole.core.grids.attention_worker", "--cell", json.dumps(self.cell.to_dict())]


def cell_work(c: AttentionCell) -> float:
    """Score and softmax work grow with batch * seq^2 * d; a backward costs about two forwards."""
    return float(c.batch) * c.seq * c.seq * c.d * (3 * c.warmup + 4 * c.iters)


class AttentionRunner(CellRunner):
    """Runs an AttentionRecord's pending cells in order (see CellRunner: held starts, cancel, saving)."""

    def __init__(self, record: AttentionRecord, cell_env: Callable[[AttentionCell], dict[str, str] | None] | None = None,
                 save_to: os.PathLike[str] | None = None, start_ahead: int | None = None,
                 gpus: list[str] | None = None, executor: Any = None) -> None:
        super().__init__(record, save_to, start_ahead, gpus, executor)
        self.cell_env = cell_env

    def cells(self) -> list[AttentionResult]:
        return self.record.cells

    def new_launch(self, index: int, cell: AttentionResult) -> AttentionLaunch:
        return AttentionLaunch(cell.cell, self.launch_env(index, self.cell_env(cell.cell) if self.cell_env else None),
                               executor=self.executor)

    def work(self, cell: AttentionResult) -> float:
        return cell_work(cell.cell)

    def measured(self, cell: AttentionResult) -> bool:
        return cell.forward_ms is not None


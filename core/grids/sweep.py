"""Sweeps: a grid of RunSpecs (size x ctx x precision x mode x warm-up), one child process per cell.

Each cell is a separate `Launch` (run by core.grids.cell_runner, which starts processes ahead of their
turn), so an OOM marks that cell `oom`, the child's exit gives the GPU its memory back and the sweep
goes on. Cancelling stops the running cell and leaves the cells not yet run `pending`; every
finished cell is kept. The time left is estimated from the cells done so far with a fixed cost per
cell (process start, model build) plus a cost proportional to its FLOPs.
"""
from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from perfconsole.core.grids.cell_runner import CellRunner
from perfconsole.core.flops import step_flops
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.launch.replicates import RepeatedLaunch, make_launch
from perfconsole.core.record import RunRecord, new_id
from perfconsole.core.settings import RunSpec, SpecError, axes

MAX_CELLS = 2000


@dataclass(frozen=True)
class SweepSpec:
    """The grid: `base` gives every field the axes do not vary."""
    base: RunSpec
    sizes: tuple[str, ...]
    ctxs: tuple[int, ...]
    precisions: tuple[str, ...]
    modes: tuple[str, ...]
    warmups: tuple[int, ...]
    # Any other setting declared as an axis (core.settings), with its values: `--checkpoint none,blocks`.
    extra: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    def columns(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        """(precision, mode, the extra axes' values): what a sweep's tables and columns are per."""
        return [(p, m, e) for p in self.precisions for m in self.modes
                for e in itertools.product(*(values for _, values in self.extra))]

    def column_of(self, spec: RunSpec) -> tuple[str, str, tuple[Any, ...]]:
        return spec.precision, spec.mode, tuple(getattr(spec, name) for name, _ in self.extra)

    def extra_words(self, values: tuple[Any, ...]) -> str:
        """` checkpoint blocks`: the extra axes' values in words, empty without them."""
        return "".join(f" {name} {v}" for (name, _), v in zip(self.extra, values))

    def cells(self) -> list[RunSpec]:
        """Precision, mode (and any extra axis), size, ctx, warm-up: a size's contexts run in a row, smallest first."""
        names = [name for name, _ in self.extra]
        return [replace(self.base, precision=p, mode=m, size=s, ctx=c, warmup=w, **dict(zip(names, e)))
                for (p, m, e), s, c, w in itertools.product(self.columns(), self.sizes, sorted(self.ctxs),
                                                           self.warmups)]

    def validate(self) -> SweepSpec:
        for name, _ in self.extra:
            if name not in axes() or name in ("size", "ctx", "precision", "mode", "warmup"):
                raise SpecError(name, f"is not a sweep axis of its own; axes: {', '.join(axes())}")
        named = [(n, getattr(self, n)) for n in ("sizes", "ctxs", "precisions", "modes", "warmups")]
        for name, values in named + list(self.extra):
            if not values:
                raise SpecError(name, "give at least one value")
            if len(set(values)) != len(values):
                raise SpecError(name, f"repeated value in {', '.join(map(str, values))}")
        if self.base.steps < 2:
            raise SpecError("steps", f"a sweep needs at least 2 measured steps for a std, not {self.base.steps}")
        if "custom" in self.sizes:
            raise SpecError("sizes", "custom sizes cannot be swept; name sizes")
        cells = self.cells()
        if len(cells) > MAX_CELLS:
            raise SpecError("sweep", f"{len(cells)} cells is more than {MAX_CELLS}")
        for cell in cells:
            cell.validate()
        return self

    @property
    def is_warmup_study(self) -> bool:
        return len(self.warmups) > 1

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.to_dict(), "sizes": list(self.sizes), "ctxs": list(self.ctxs),
                "precisions": list(self.precisions), "modes": list(self.modes), "warmups": list(self.warmups),
                "extra": [[name, list(values)] for name, values in self.extra]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepSpec:
        return cls(RunSpec.from_dict(d["base"]), tuple(d["sizes"]), tuple(d["ctxs"]),
                   tuple(d["precisions"]), tuple(d["modes"]), tuple(d["warmups"]),
                   tuple((name, tuple(values)) for name, values in d.get("extra", [])))


@dataclass
class SweepRecord:
    spec: SweepSpec
    runs: list[RunRecord]
    id: str = field(default_factory=new_id)
    name: str = ""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "pending"                 # pending | running | ok | cancelled
    cell_seconds: list[float | None] = field(default_factory=list)
    cell_gpus: list[str | None] = field(default_factory=list)   # the GPU each cell ran on (--gpus)

    kind = "sweep"

    def __post_init__(self) -> None:
        if not self.name:
            s = self.spec
            models = dict.fromkeys(s.base.with_(size=size).model_label() for size in s.sizes)  # a factory's: one
            self.name = (f"sweep {','.join(models)} ctx {','.join(map(str, sorted(s.ctxs)))} "
                         f"{','.join(s.precisions)} {','.join(s.modes)}"
                         + "".join(f" {name} {','.join(map(str, values))}" for name, values in s.extra)
                         + (f" warm-up {','.join(map(str, s.warmups))}" if s.is_warmup_study else ""))
        if len(self.cell_seconds) < len(self.runs):
            self.cell_seconds += [None] * (len(self.runs) - len(self.cell_seconds))

    @classmethod
    def new(cls, spec: SweepSpec) -> SweepRecord:
        return cls(spec, [RunRecord(cell) for cell in spec.cells()])

    @property
    def environment(self) -> dict[str, Any]:
        return next((r.environment for r in self.runs if r.environment), {})

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.runs:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created": self.created, "status": self.status,
                "spec": self.spec.to_dict(), "runs": [r.to_dict() for r in self.runs],
                "cell_seconds": self.cell_seconds, "cell_gpus": self.cell_gpus}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepRecord:
        return cls(SweepSpec.from_dict(d["spec"]), [RunRecord.from_dict(r) for r in d["runs"]],
                   id=d["id"], name=d.get("name", ""), created=d.get("created", ""), status=d["status"],
                   cell_seconds=list(d.get("cell_seconds", [])), cell_gpus=list(d.get("cell_gpus", [])))


def cell_work(spec: RunSpec) -> float:
    """FLOPs of all the cell's steps: what its run time grows with, beyond the fixed start-up cost."""
    d_model, d_ff, n_layers, _ = spec.dims()
    return step_flops(spec.mode, d_model, d_ff, n_layers, spec.vocab, spec.batch, spec.ctx) * (
        spec.warmup + spec.steps)


CellEnv = Callable[[RunSpec], dict[str, str] | None]


class SweepRunner(CellRunner):
    """Runs a SweepRecord's pending cells in order (see CellRunner: held starts, cancel, saving)."""

    def __init__(self, record: SweepRecord, out_dir: Path | None = None, cell_env: CellEnv | None = None,
                 save_to: Path | None = None, start_ahead: int | None = None, gpus: list[str] | None = None,
                 executor: Any = None) -> None:
        super().__init__(record, save_to, start_ahead, gpus, executor)
        self.out_dir = out_dir
        self.cell_env = cell_env

    def cells(self) -> list[RunRecord]:
        return self.record.runs

    def new_launch(self, index: int, cell: RunRecord) -> Launch | RepeatedLaunch:
        out = self.out_dir / f"cell-{index:03d}" if self.out_dir else None
        return make_launch(cell.spec, out_dir=out, env=self.launch_env(index, self.cell_env(cell.spec) if self.cell_env else None),
                           executor=self.executor)

    def work(self, cell: RunRecord) -> float:
        return cell_work(cell.spec)

    def measured(self, cell: RunRecord) -> bool:
        return bool(cell.steps)


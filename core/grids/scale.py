"""The scaling curve: one spec at several process counts, the one-process program first, then a data-parallel
job (torchrun) per count, each in its own turn, run by the sweep's runner (saving after every count).

Weak scaling (the default) gives every rank the spec's batch, so the work grows with the count; strong scaling
(`strong`) holds the global batch: the one process has the batch and each of N ranks batch / N. The count 1 is
always the one-process program (core.launch.scaling.one_process: no wrapper, no process group), so a curve
starts from what one GPU does alone; the report (core.reports.scale) divides its median step by the others'.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from perfconsole.core.grids.cell_records import CellRecords
from perfconsole.core.grids.sweep import SweepRunner
from perfconsole.core.launch.scaling import one_process, rank_threads
from perfconsole.core.record import RunRecord, new_id
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.core.settings.rules import MAX_NPROC
from perfconsole.core.settings.declarations import Command

# `--nproc` takes the counts (a comma list, core.cli.scale); a count's run is one process or one job, so no
# replicate processes and no --scaling (the curve's first count is the one-process run).
SCALE = Command("scale", omit=frozenset({"nproc", "scaling", "repeat"}))
PARALLELS = ("ddp", "fsdp")


def processes_text(n: int) -> str:
    return f"{n} process" + ("es" if n != 1 else "")


@dataclass(frozen=True)
class ScaleSpec:
    """`base` is the job's spec (its wrapper and settings; `nproc` the largest count), each rank with
    `base.batch` under weak scaling, the global batch under strong; `counts` in order, 1 first."""
    base: RunSpec
    counts: tuple[int, ...]
    strong: bool = False
    added_one: bool = False     # the counts asked for left out 1: the one-process run was added

    @classmethod
    def of(cls, base: RunSpec, counts: tuple[int, ...], strong: bool = False) -> ScaleSpec:
        """The curve over `counts` as given (in any order), the one-process run added where they leave it out."""
        if len(set(counts)) != len(counts):
            raise SpecError("nproc", f"a count is named twice in {','.join(map(str, counts))}")
        added = 1 not in counts
        ordered = tuple(sorted(set(counts) | {1}))
        return cls(base.with_(nproc=ordered[-1]), ordered, strong, added)

    def batch_at(self, n: int) -> int:
        """Each process's batch at count n."""
        return self.base.batch // n if self.strong else self.base.batch

    def cell(self, n: int) -> RunSpec:
        if n == 1:
            return one_process(self.base).with_(batch=self.base.batch)
        return self.base.with_(nproc=n, batch=self.batch_at(n))

    def cells(self) -> list[RunSpec]:
        return [self.cell(n) for n in self.counts]

    def validate(self) -> ScaleSpec:
        bad = [n for n in self.counts if not 1 <= n <= MAX_NPROC]
        if bad:
            raise SpecError("nproc", f"each count must be 1 to {MAX_NPROC}, not {bad[0]}")
        if max(self.counts) < 2:
            raise SpecError("nproc", "a scaling curve needs a count of 2 or more (give a comma list like 1,2,4)")
        if self.base.parallel not in PARALLELS:
            raise SpecError("parallel", f"must be one of {', '.join(PARALLELS)} for a scaling curve, "
                                        f"not {self.base.parallel!r}")
        if self.strong:
            uneven = [n for n in self.counts if self.base.batch % n]
            if uneven:
                raise SpecError("batch", f"--strong splits the global batch {self.base.batch} over the processes: it "
                                         f"must divide by every count ({','.join(map(str, self.counts))}), and "
                                         f"{self.base.batch} does not divide by {uneven[0]}")
        if self.base.steps < 2:
            raise SpecError("steps", f"a scaling curve needs at least 2 measured steps, not {self.base.steps}")
        for cell in self.cells():
            cell.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.to_dict(), "counts": list(self.counts), "strong": self.strong,
                "added_one": self.added_one}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScaleSpec:
        return cls(RunSpec.from_dict(d["base"]), tuple(int(n) for n in d["counts"]), bool(d.get("strong", False)),
                   bool(d.get("added_one", False)))


@dataclass
class ScaleRecord(CellRecords):
    spec: ScaleSpec
    runs: list[RunRecord]       # one per count, in the spec's order
    id: str = field(default_factory=new_id)
    name: str = ""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "pending"     # pending | running | ok | cancelled
    cell_seconds: list[float | None] = field(default_factory=list)

    kind = "scale"
    spec_class = ScaleSpec

    def __post_init__(self) -> None:
        if not self.name:
            s = self.spec
            b = s.base
            self.name = (f"scale {b.model_label()} ctx{b.ctx} b{b.batch} {b.precision} {b.parallel} "
                         f"x{','.join(map(str, s.counts))} {'strong' if s.strong else 'weak'}")
        if len(self.cell_seconds) < len(self.runs):
            self.cell_seconds += [None] * (len(self.runs) - len(self.cell_seconds))

    @classmethod
    def new(cls, spec: ScaleSpec) -> ScaleRecord:
        return cls(spec, [RunRecord(cell, name=f"{processes_text(n)}: {cell.label()}")
                          for n, cell in zip(spec.counts, spec.cells())])

    def reopen(self) -> list[int]:
        """Make the counts that did not finish pending again, so a runner goes on where the curve stopped;
        returns those counts."""
        return [self.spec.counts[i] for i in self.reopen_cells()]


class ScaleRunner(SweepRunner):
    """A count is a cell: the one process, then each job, started in its turn (a torchrun job's ranks cannot
    be held), so no count runs beside another. The one process gets the threads torchrun gives each rank."""

    def __init__(self, record: ScaleRecord, *args: Any, **kw: Any) -> None:
        kw["start_ahead"] = 1
        kw.setdefault("cell_env", lambda spec: rank_threads(None) if spec.nproc == 1 else None)
        super().__init__(record, *args, **kw)

"""The optimization ladder: a fixed sequence of rungs, each the one before it plus one change, each rung a
normal run in its own process (run by the sweep's runner: held starts, cancel, saving as it goes).

A rung that needs what this machine lacks (CUDA, compute capability 8.9 for fp8, an optional package)
finishes `unsupported` with the reason, decided in its own worker, and the ladder goes on: the next
rung still carries that rung's change, so every rung means the same thing on every GPU machine. A change
that the ladder's own device or precision rules out (CUDA graphs, liger and fp8 on the CPU; bf16 weights at
fp32) is the exception: carried up, it would make every rung above it unsupported for that rung's reason, not
its own, so it stays on its own rung and the rungs above run their own change without it. By
default each rung also runs a short torch-profiler pass after its quiet steps (`--profile torch`: the
figures are the quiet ones) so the report can say which kernel categories moved.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.grids.cell_records import CellRecords
from perfconsole.core.grids.sweep import SweepRunner
from perfconsole.core.record import RunRecord, new_id
from perfconsole.core.grids.rungs import (DP_RUNGS, RUNGS, Rung, default_rungs, for_other_models, not_applicable,
                                          rung_set)
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.core.settings.rules import unmet
from perfconsole.core.settings.declarations import Command

# The ladder's own defaults (a long context in bf16, where its rungs matter) and the settings its rungs set,
# which it takes from no flag; one process per rung (or one job of --nproc processes), profiled by the ladder itself.
LADDER = Command("ladder", defaults={"ctx": 512, "precision": "bf16", "warmup": 3}, fixed={"mode": "train"},
                 omit=frozenset({k for r in (*RUNGS, *DP_RUNGS) for k in r.change} | {
                     "profile", "memory", "step_sync", "d_model", "d_ff", "n_layers", "n_heads", "tf32"}))
RUNG_NAMES = tuple(r.name for r in RUNGS)
DP_RUNG_NAMES = tuple(r.name for r in DP_RUNGS)
DEFAULT_RUNGS = default_rungs(RunSpec())


def rung(name: str, base: RunSpec | None = None) -> Rung:
    """The rung of that name in the base's sequence (one process without a base)."""
    rs = rung_set(base) if base is not None else RUNGS
    return next(r for r in rs if r.name == name)


@dataclass(frozen=True)
class LadderSpec:
    """`base` gives size, ctx, batch, precision, steps and the rest; `rungs` names the rungs to run
    (in ladder order; a rung left out still passes its change up, unless it is opt-in)."""
    base: RunSpec
    rungs: tuple[str, ...] = ()     # none named: the base's defaults (default_rungs)
    profile: bool = True

    def __post_init__(self) -> None:
        if not self.rungs:
            object.__setattr__(self, "rungs", default_rungs(self.base))

    @property
    def all_rungs(self) -> tuple[Rung, ...]:
        """The sequence this ladder climbs: one process's, or a data-parallel job's (`base.nproc` > 1)."""
        return rung_set(self.base)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.all_rungs)

    def rungs_in_order(self) -> list[str]:
        return [n for n in self.names if n in self.rungs]

    def cells(self) -> list[RunSpec]:
        """One spec per rung run, in ladder order: each the one below plus its own change, without the changes
        the base's device or precision rules out (those stay on their own rung, which says why)."""
        return [replace(own, profile="torch" if self.profile else "none")
                for r, _, own in self.climb() if r.name in self.rungs]

    def climb(self) -> list[tuple[Rung, RunSpec, RunSpec]]:
        """(rung, the spec below it, that spec with the rung's change) for every rung of the sequence, named or
        not: a change the spec below rules out (Rung.ruled_out) or that cannot apply is not carried up, nor an
        opt-in rung's that the ladder does not name (it runs only when asked for, and so does its change)."""
        out, spec = [], self.base
        for r in self.all_rungs:
            own = replace(spec, **r.change)
            out.append((r, spec, own))
            if r.opt_in and r.name not in self.rungs:
                continue
            if r.ruled_out(spec) is None and not not_applicable(r.name, self.base):
                spec = own
        return out

    def not_carried(self) -> list[tuple[str, str]]:
        """(rung, why) for each change the base's device or precision keeps from the rungs above."""
        return [(r.name, why) for r, below, _ in self.climb() if (why := r.ruled_out(below)) is not None]

    def validate(self) -> LadderSpec:
        unknown = [n for n in self.rungs if n not in self.names]
        other = [why for n in unknown if (why := for_other_models(n, self.base))]
        if other:
            raise SpecError("rungs", "; ".join(other))
        if unknown:
            which = "a data-parallel ladder (nproc 2 or more)" if self.base.nproc > 1 else "a one-process ladder"
            raise SpecError("rungs", f"must be names from {', '.join(self.names)} for {which}, not {', '.join(unknown)}")
        if len(set(self.rungs)) != len(self.rungs):
            raise SpecError("rungs", "a rung is named twice")
        if self.base.mode != "train":
            raise SpecError("mode", f"the ladder times train steps (its rungs change the optimizer), not {self.base.mode}")
        if self.base.steps < 2:
            raise SpecError("steps", f"a ladder needs at least 2 measured steps for a std, not {self.base.steps}")
        if self.base.profile != "none" or self.base.memory:
            raise SpecError("profile", "the ladder chooses its own profiling (--no-profile turns it off)")
        if self.base.warmup < 1 and any(cell.compile for cell in self.cells()):
            raise SpecError("warmup", "the ladder's compiled rungs need at least 1 warm-up step: the first call "
                                      "compiles, which takes seconds and is no step's time")
        for cell in self.cells():
            if unmet(cell) is None:  # a rung the spec rules out ends `unsupported` before it starts
                cell.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"base": self.base.to_dict(), "rungs": list(self.rungs), "profile": self.profile}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LadderSpec:
        return cls(RunSpec.from_dict(d["base"]), tuple(d["rungs"]), bool(d.get("profile", True)))


@dataclass
class LadderRecord(CellRecords):
    spec: LadderSpec
    runs: list[RunRecord]       # one per rung run, in ladder order
    id: str = field(default_factory=new_id)
    name: str = ""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "pending"     # pending | running | ok | cancelled
    cell_seconds: list[float | None] = field(default_factory=list)

    kind = "ladder"
    spec_class = LadderSpec

    def __post_init__(self) -> None:
        if not self.name:
            b = self.spec.base
            self.name = f"ladder {b.size} ctx{b.ctx} b{b.batch} {b.precision}" + (f" x{b.repeat}" if b.repeat > 1 else "")
        if len(self.cell_seconds) < len(self.runs):
            self.cell_seconds += [None] * (len(self.runs) - len(self.cell_seconds))

    @classmethod
    def new(cls, spec: LadderSpec) -> LadderRecord:
        runs = [RunRecord(cell, name=f"{name}: {cell.label()}") for name, cell in zip(spec.rungs_in_order(), spec.cells())]
        for name, r in zip(spec.rungs_in_order(), runs):
            reason = not_applicable(name, spec.base) or (f"unsupported: {why[1]}" if (why := unmet(r.spec)) else None)
            if reason:  # finished before it starts: the runner runs pending rungs only
                r.status, r.error = "unsupported", ev.Error("unsupported", reason)
        return cls(spec, runs)

    def reopen(self) -> list[str]:
        """Make the rungs that did not finish (cancelled, or never started) pending again, so a runner goes on
        where the ladder stopped; the rungs that finished keep their figures. Returns the reopened rungs' names."""
        names = self.spec.rungs_in_order()
        return [names[i] for i in self.reopen_cells()]

    def machines(self) -> list[tuple[str, list[str]]]:
        """(host, GPU, driver, torch) in words, with the rungs run there, in ladder order of first use."""
        out: dict[str, list[str]] = {}
        for name, r in zip(self.spec.rungs_in_order(), self.runs):
            e = r.environment
            if e:
                where = f"{e.get('host')} ({e.get('gpu_name') or e.get('device')}, driver {e.get('driver')}, torch {e.get('torch')})"
                out.setdefault(where, []).append(name)
        return list(out.items())

    @property
    def rungs(self) -> list[Rung]:
        return [rung(n, self.spec.base) for n in self.spec.rungs_in_order()]


class LadderRunner(SweepRunner):
    """A ladder's rungs are runs like a sweep's cells: same runner, one process (or --repeat N) per rung.
    A data-parallel rung is a torchrun job, started in its turn (its ranks cannot be held), after the rungs
    before it, whose records give it its one-process baseline and its memory estimate (core.grids.dp_ladder)."""

    def __init__(self, record: LadderRecord, *args: Any, **kw: Any) -> None:
        if record.spec.base.nproc > 1:
            kw["start_ahead"] = 1
        super().__init__(record, *args, **kw)

    def new_launch(self, index: int, cell: RunRecord) -> Any:
        if not cell.spec.scaling:
            return super().new_launch(index, cell)
        from perfconsole.core.grids.dp_ladder import Refused, memory_estimate, refusal_text, shared_baseline
        from perfconsole.core.launch.scaling import ScalingLaunch

        before = list(zip(self.record.spec.rungs_in_order(), self.record.runs))[:index]
        est = memory_estimate(before, cell.spec)
        if est is not None and not est["fits"]:
            return Refused("oom", refusal_text(est))
        out = self.out_dir / f"cell-{index:03d}" if self.out_dir else None
        return ScalingLaunch(cell.spec, out_dir=out, env=self.launch_env(index, None), executor=self.executor,
                             known=shared_baseline(before, cell.spec))

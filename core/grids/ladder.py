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
from perfconsole.core.grids.sweep import SweepRunner
from perfconsole.core.record import RunRecord, new_id
from perfconsole.core.spec.settings import Command, declared
from perfconsole.core.spec import RunSpec, SpecError
from perfconsole.core.spec.rules import unmet

SETTINGS = {f.name: st for f, st in declared(RunSpec)}


@dataclass(frozen=True)
class Rung:
    name: str
    change: dict[str, Any]      # the RunSpec fields this rung sets, on top of the rung before it
    what: str                   # the change, in words
    needs: str = ""             # what it needs beyond torch, in words
    same_numerics: bool = True  # False where the change rounds differently on purpose (its name says so)
    opt_in: bool = False        # run only when --rungs names it (a trade of time for memory, not a speed-up)

    def ruled_out(self, spec: RunSpec) -> str | None:
        """Why the spec (this rung's, its change made) rules the change out: the changed settings' own
        `needs` (core.spec), in their words; None where it can run as far as the spec alone can tell."""
        for name in reversed(list(self.change)):
            st = SETTINGS[name]
            why = st.needs(getattr(spec, name), spec) if st.needs else None
            if why:
                return why
        return None


# The first rung sets every knob the later ones turn, so the ladder starts from the same program
# whatever the base spec says.
RUNGS: tuple[Rung, ...] = (
    Rung("eager", {"attention": "naive", "compile": False, "compile_mode": "default", "optimizer": "forloop",
                   "kernels": "torch", "fp8": False, "weights": "fp32"}, "eager, naive attention, for-loop AdamW"),
    Rung("sdpa", {"attention": "sdpa"}, "scaled_dot_product_attention (flash / memory-efficient kernels)"),
    Rung("compile", {"compile": True}, "torch.compile of the model"),
    Rung("fused-adamw", {"optimizer": "fused"}, "fused AdamW: one kernel for all parameters"),
    Rung("cuda-graphs", {"compile_mode": "reduce-overhead"}, "CUDA graphs (compile mode reduce-overhead)",
         "device cuda"),
    Rung("bf16-weights", {"weights": "bf16"}, "bf16 parameters, gradients and AdamW state (no fp32 master copy)",
         "precision bf16", same_numerics=False),
    Rung("liger", {"kernels": "liger"}, "liger-kernel fused SwiGLU and cross-entropy (and RMSNorm when not compiled)",
         "device cuda, perfconsole[fast]"),
    Rung("fp8", {"fp8": True}, "torchao float8 matmuls", "compute capability >= 8.9, perfconsole[fast]",
         same_numerics=False),
    Rung("checkpoint", {"checkpoint": "blocks"}, "activation checkpointing of each block: less memory, more time",
         opt_in=True),
)
RUNG_NAMES = tuple(r.name for r in RUNGS)
# The ladder's own defaults (a long context in bf16, where its rungs matter) and the settings its rungs set,
# which it takes from no flag; one process per rung, profiled by the ladder itself.
LADDER = Command("ladder", defaults={"ctx": 512, "precision": "bf16", "warmup": 3}, fixed={"mode": "train"},
                 omit=frozenset({k for r in RUNGS for k in r.change} | {
                     "profile", "memory", "step_sync", "nproc", "parallel", "bucket_mb", "grad_as_bucket_view",
                     "comm_hook", "reshard", "fsdp_bf16", "optimize_ddp", "scaling", "d_model", "d_ff", "n_layers",
                     "n_heads", "tf32"}))
DEFAULT_RUNGS = tuple(r.name for r in RUNGS if not r.opt_in)


def not_applicable(name: str, base: RunSpec) -> str | None:
    """Why a rung cannot apply to the base's model at all (its change is then not carried up), or None.
    A factory's attention and layers are its own: no attention switch, no liger patch."""
    factory = base.model != "builtin" and not base.model.startswith("hf:")
    if factory and name == "sdpa":
        return "unsupported: a factory model's attention is its own code (--attention does not reach it)"
    if factory and name == "liger":
        return "unsupported: liger patches the builtin model and hf: architectures; a factory's layers are its own"
    return None


def rung(name: str) -> Rung:
    return RUNGS[RUNG_NAMES.index(name)]


@dataclass(frozen=True)
class LadderSpec:
    """`base` gives size, ctx, batch, precision, steps and the rest; `rungs` names the rungs to run
    (in ladder order; a rung left out still passes its change up)."""
    base: RunSpec
    rungs: tuple[str, ...] = DEFAULT_RUNGS
    profile: bool = True

    def rungs_in_order(self) -> list[str]:
        return [n for n in RUNG_NAMES if n in self.rungs]

    def cells(self) -> list[RunSpec]:
        """One spec per rung run, in ladder order: each the one below plus its own change, without the changes
        the base's device or precision rules out (those stay on their own rung, which says why)."""
        out, spec = [], self.base
        for r in RUNGS:
            own = replace(spec, **r.change)
            if r.name in self.rungs:
                out.append(replace(own, profile="torch" if self.profile else "none"))
            if r.ruled_out(own) is None and not not_applicable(r.name, self.base):
                spec = own
        return out

    def not_carried(self) -> list[tuple[str, str]]:
        """(rung, why) for each change the base's device or precision keeps from the rungs above."""
        return [(r.name, why) for r, cell in zip(RUNGS, LadderSpec(self.base, RUNG_NAMES, self.profile).cells())
                if (why := r.ruled_out(cell)) is not None]

    def validate(self) -> LadderSpec:
        unknown = [n for n in self.rungs if n not in RUNG_NAMES]
        if unknown or not self.rungs:
            raise SpecError("rungs", f"must be names from {', '.join(RUNG_NAMES)}, not {', '.join(unknown) or 'none'}")
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
class LadderRecord:
    spec: LadderSpec
    runs: list[RunRecord]       # one per rung run, in ladder order
    id: str = field(default_factory=new_id)
    name: str = ""
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    status: str = "pending"     # pending | running | ok | cancelled
    cell_seconds: list[float | None] = field(default_factory=list)

    kind = "ladder"

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
        names = []
        for i, (name, r) in enumerate(zip(self.spec.rungs_in_order(), self.runs)):
            if r.status in ("pending", "running", "cancelled"):
                self.runs[i] = RunRecord(r.spec, name=r.name)
                self.cell_seconds[i] = None
                names.append(name)
        self.status = "pending"
        return names

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
        return [rung(n) for n in self.spec.rungs_in_order()]

    @property
    def environment(self) -> dict[str, Any]:
        return next((r.environment for r in self.runs if r.environment), {})

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created": self.created, "status": self.status,
                "spec": self.spec.to_dict(), "runs": [r.to_dict() for r in self.runs],
                "cell_seconds": self.cell_seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LadderRecord:
        return cls(LadderSpec.from_dict(d["spec"]), [RunRecord.from_dict(r) for r in d["runs"]], id=d["id"],
                   name=d.get("name", ""), created=d.get("created", ""), status=d["status"],
                   cell_seconds=list(d.get("cell_seconds", [])))


class LadderRunner(SweepRunner):
    """A ladder's rungs are runs like a sweep's cells: same runner, one process (or --repeat N) per rung."""

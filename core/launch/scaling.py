"""`--scaling`: a data-parallel job preceded by the one-process run of the same spec, for weak-scaling
efficiency (the one-process median step over the job's median step; each rank has the spec's batch).

`ScalingLaunch` looks like one `Launch` to its callers. The one-process run comes first, on the first
GPU of the job, and is folded into a record of its own; the stream then says `baseline` with its
status and summary, and goes on with the job's events. A baseline that fails (an OOM, say) is reported
with its status and the job still runs; a cancel during the baseline ends the whole run.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.launch.sequence import LaunchSequence
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec, same_program


def one_process(spec: RunSpec) -> RunSpec:
    """The same model, batch and steps in one process, without the data-parallel settings, and timed as
    the job's ranks are (a step in flight, unless the job synchronises every step)."""
    return spec.with_(nproc=1, parallel="none", bucket_mb=None, grad_as_bucket_view=False, comm_hook="none",
                      scaling=False, reshard=True, fsdp_bf16=False,
                      optimize_ddp="ddp_optimizer", nccl_priority=False, zero=False, zero2=False)


# What must match for a saved one-process run to be the baseline of a job (steps and profiling may differ):
# the settings declared `same_program` (core.settings).
SAME_PROGRAM = same_program()


def saved_baseline(saved: RunRecord, spec: RunSpec) -> ev.Baseline:
    """A saved run as the job's one-process baseline (`run --baseline FILE`); SpecError if it is not one."""
    from perfconsole.core.settings import SpecError

    if saved.spec.nproc != 1:
        raise SpecError("baseline", f"must be a one-process run, not nproc {saved.spec.nproc}")
    differ = [f for f in SAME_PROGRAM if getattr(saved.spec, f) != getattr(spec, f)]
    if differ:
        f = differ[0]
        raise SpecError("baseline", f"is another program: {f} {getattr(saved.spec, f)!r}, the job's {getattr(spec, f)!r}")
    if saved.spec.step_sync != spec.step_sync:
        how = {True: "synchronising every step (--step-sync)", False: "with a step in flight"}
        raise SpecError("baseline", f"was measured {how[saved.spec.step_sync]}, the job {how[spec.step_sync]}: "
                                    "time both the same way")
    if saved.status != "ok" or saved.summary is None:
        raise SpecError("baseline", f"has no finished measurement (status {saved.status})")
    return ev.Baseline("ok", saved.summary.to_dict())


def rank_threads(env: dict[str, str] | None) -> dict[str, str]:
    """The OMP_NUM_THREADS torchrun gives each rank unless it is set (1): a one process given the same
    compares like with like, not a multi-threaded host against single-threaded ranks."""
    return {"OMP_NUM_THREADS": {**os.environ, **(env or {})}.get("OMP_NUM_THREADS", "1")}


class ScalingLaunch(LaunchSequence):
    """`known`: a one-process run of the same program measured already (a ladder's earlier rung, its `source`
    in words); it is the baseline, and only the job runs."""

    def __init__(self, spec: RunSpec, out_dir: Path | None = None, nsys: str | None = None,
                 env: dict[str, str] | None = None, executor: Any = None,
                 known: ev.Baseline | None = None) -> None:
        self.spec = spec
        self.known = known
        base_out = out_dir / "one-process" if out_dir is not None else None
        threads = rank_threads(env)
        # The baseline is never profiled: its profile would cost time and answer nothing asked here.
        self.baseline = Launch(one_process(spec).with_(profile="none"), out_dir=base_out, env={**(env or {}), **threads},
                               executor=executor)
        self.job = Launch(spec, out_dir=out_dir, nsys=nsys, env=env, executor=executor)
        self.current: Launch = self.job if known else self.baseline
        self._cancelled = False

    def start(self, hold: bool = False) -> None:
        if hold:
            raise ValueError("a torchrun job cannot be held: its ranks share one stdin")
        self.current.start()

    def wait_ready(self) -> None:
        pass

    def events(self) -> Iterator[ev.Event]:
        if self.known is not None:
            yield ev.Progress("baseline", self.known.source or "the one-process run, measured before")
            yield self.known
            yield from self.job.events()
            return
        yield ev.Progress("baseline", "the one-process run of the same spec, for scaling efficiency")
        base = RunRecord(self.baseline.spec)
        for event in self.baseline.events():
            base.apply(event)
            if isinstance(event, ev.Step) and not event.warmup:
                yield ev.Progress("baseline", f"one process: step {len(base.steps)}/{self.spec.steps} "
                                              f"{event.total_ms:.1f} ms")
        yield ev.Baseline(base.status, base.summary.to_dict() if base.summary else None)
        if self._cancelled or base.status == "cancelled":
            yield ev.Error("cancelled", "stopped during the one-process run (a signal, or the user)")
            yield ev.Finished("cancelled")
            return
        self.current = self.job
        if self._cancelled:
            yield ev.Finished("cancelled")
            return
        yield from self.job.events()

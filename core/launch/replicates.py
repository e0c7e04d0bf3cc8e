"""A run repeated in fresh processes: `--repeat N` runs the same spec N times, one after the other.

One process cannot tell a quiet day from a noisy one (clocks, neighbours, where its memory landed), so
the spread between processes is measured by running more of them (as torch.utils.benchmark and pyperf
do). `RepeatedLaunch` looks like one `Launch` to its callers: one event stream that starts each
process with an `ev.Replicate` marker, passes the processes' events through, and ends with exactly one
`Finished`. The first failure (OOM, crash, cancel) ends the run; every step measured so far is kept.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.settings import RunSpec


class RepeatedLaunch:
    def __init__(self, spec: RunSpec, out_dir: Path | None = None, nsys: str | None = None,
                 env: dict[str, str] | None = None, executor: Any = None) -> None:
        self.spec = spec
        self.out_dir = out_dir
        self.nsys = nsys
        self.env = env
        self.executor = executor  # each replicate its own Slurm job, wherever Slurm places it
        self.current: Launch | None = None
        self._cancelled = False
        self._started = False

    def _launch(self, index: int) -> Launch:
        out = self.out_dir / f"replicate-{index + 1}" if self.out_dir is not None else None
        self.current = Launch(self.spec, out_dir=out, nsys=self.nsys, env=self.env, executor=self.executor)
        return self.current

    def start(self, hold: bool = False) -> None:
        """Start the first process (held, if asked: see Launch.start); the others start in turn."""
        self._launch(0).start(hold=hold)
        self._started = True

    def wait_ready(self) -> None:
        if self.current is not None:
            self.current.wait_ready()

    @property
    def pid(self) -> int | None:
        return self.current.pid if self.current else None

    def cancel(self) -> None:
        self._cancelled = True
        if self.current is not None:
            self.current.cancel()

    def kill(self) -> None:
        self._cancelled = True
        if self.current is not None:
            self.current.kill()

    def discard(self) -> None:
        self._cancelled = True
        if self.current is not None:
            self.current.discard()

    def events(self) -> Iterator[ev.Event]:
        n = self.spec.repeat
        status = "ok"
        for i in range(n):
            if self._cancelled:
                status = "cancelled"
                break
            launch = self.current if (i == 0 and self._started) else self._launch(i)
            assert launch is not None
            yield ev.Replicate(i, n)
            yield ev.Progress("replicate", f"process {i + 1} of {n}")
            finished: ev.Finished | None = None
            for event in launch.events():
                if isinstance(event, ev.Finished):
                    finished = event
                else:
                    yield event
            status = finished.status if finished else "error"
            if status != "ok":
                break
        yield ev.Finished(status)


def make_launch(spec: RunSpec, **kw: Any) -> Any:
    """The launch for a spec: one process, `spec.repeat` of them in turn, a torchrun job preceded by its
    one-process run (`spec.scaling`, core.launch.scaling), or, under a profiler that slows the whole process
    (nsys), plain processes of the spec for the headline and then the capture (core.launch.profiled)."""
    if spec.scaling:
        from perfconsole.core.launch.scaling import ScalingLaunch

        return ScalingLaunch(spec, **kw)
    if spec.profile == "ncu":  # the torch-profiled spec first (headline, kernel times), then ncu (core.launch.ncu_launch)
        from perfconsole.core.launch.ncu_launch import NcuLaunch, timed_spec

        return NcuLaunch(spec, make_launch(timed_spec(spec), **kw), **kw)
    from perfconsole.core.launch.profiled import APART, ProfiledLaunch, plain_dir, plain_spec

    if spec.profile in APART:
        plain = make_launch(plain_spec(spec), **{**kw, "out_dir": plain_dir(kw.get("out_dir")), "nsys": None})
        return ProfiledLaunch(spec, plain, **kw)
    return RepeatedLaunch(spec, **kw) if spec.repeat > 1 else Launch(spec, **kw)

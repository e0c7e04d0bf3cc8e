"""Start the worker for a RunSpec in its own process group, stream its events, cancel it, clean up.

`Launch.events()` yields decoded events and always ends with exactly one `Finished`. Whatever the
child does (exit cleanly, OOM, crash, get killed, print junk), the caller sees a well-formed stream:
a crash or kill becomes an `error` event with the exit code or signal and the tail of stderr. Every
live launch is killed (whole process group) at interpreter exit, so nothing outlives the console
(core.launch.processes owns the process itself; core.launch.nsys the nsys wrapping and its tables).
A launch can be started ahead of its turn with `start(hold=True)`: the child imports, says it is
ready (`wait_ready()`), and touches no GPU until `events()` lets it go (core.grids.cell_runner uses this).
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.processes import STDERR_TAIL, ChildProcess
from perfconsole.core.launch.telemetry import MeasuredStepsTelemetry
from perfconsole.core.settings import RunSpec


def worker_argv(spec: RunSpec, out_dir: Path | None) -> list[str]:
    argv = [sys.executable, "-m", "perfconsole.core.measure.worker", "--spec", json.dumps(spec.to_dict())]
    if out_dir is not None:
        argv += ["--out-dir", str(out_dir)]
    return argv


class Launch(ChildProcess):
    def __init__(self, spec: RunSpec, out_dir: Path | None = None, nsys: str | None = None,
                 env: dict[str, str] | None = None, executor: Any = None) -> None:
        super().__init__(env, executor)
        self.spec = spec
        self.out_dir = out_dir.absolute() if out_dir is not None else None  # files the record names from anywhere
        self.nsys_explicit = nsys
        self.other_stdout: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._pending: list[ev.Event] = []
        self._nsys = None
        self._rep_base: Path | None = None
        self._refused = False
        self._held = False
        self._early: list[str] = []  # stdout lines read by wait_ready(), replayed by events()
        self._telemetry = MeasuredStepsTelemetry(spec.device == "cuda" and executor is None, env)
        self._multi_node: tuple[int, Path] | None = None
        self.start_how = ""  # "warm", or "cold: <why>" (core.launch.warm), once started

    # --- lifecycle -----------------------------------------------------------------------------
    def command(self) -> list[str] | None:
        """The argv to run, or None when the launch is refused (the reason is already pending).

        Subclasses run another worker through the same stream, cancel and clean-up by overriding this.
        """
        spec = self.spec
        if spec.profile == "nsys":
            from perfconsole.core.launch.nsys import NsysError, find_nsys, profile_command

            try:
                self._nsys = find_nsys(self.nsys_explicit)
            except NsysError as exc:  # an nsys the user named that does not work: say so, run nothing
                self._pending += [ev.Error("profiler", str(exc)), ev.Finished("error")]
                return None
            if self._nsys is None:
                self._pending.append(ev.Error("profiler", "nsys not found; using the PyTorch profiler instead"))
                spec = self.spec = spec.with_(profile="torch")
            else:
                out = self._need_out_dir()
                self._rep_base = out / "profile"
                self._pending.append(ev.Progress("profiling", f"under nsys {self._nsys.version}"))
                if spec.nproc > 1:  # one capture per rank: nsys expands %q{RANK} from torchrun's env
                    return self._torchrun(profile_command(self._nsys, worker_argv(spec, out),
                                                          out / "profile-rank%q{RANK}"))
                return profile_command(self._nsys, worker_argv(spec, out), self._rep_base)
        if spec.profile == "torch" or spec.memory or spec.nproc > 1:
            self._need_out_dir()
        if spec.nproc > 1:
            return self._torchrun(self._rank_argv(worker_argv(spec, self.out_dir)))
        return worker_argv(spec, self.out_dir)

    def _rank_argv(self, argv: list[str]) -> list[str]:
        """What torchrun starts as each rank: on this machine, core.launch.warm_rank around the worker, which forks
        it from a warm process where one is up and may (else it becomes the worker cold and says why, as with
        PERFCONSOLE_WARM=off); a Slurm job's ranks start cold, on nodes where the console's warm process is not."""
        from perfconsole.core.launch import warm

        if self.executor is not None:
            return argv
        own = warm._own
        if own is not None and own.proc is not None:  # this process's own: the ranks wait for it as a launch would
            self.env = {**(self.env or {}), warm.SHARED_VAR: warm.shared_value(own)}
        return [sys.executable, "-m", "perfconsole.core.launch.warm_rank", *argv]

    def _torchrun(self, argv: list[str]) -> list[str]:
        from perfconsole.core.launch.torchrun import torchrun_command

        assert self.out_dir is not None
        nodes = getattr(self.executor, "nodes", 1)
        if nodes > 1:  # each node's task starts torchrun around argv (core.launch.slurm_task)
            self._pending.append(ev.Progress("starting", f"torchrun: {self.spec.nproc} processes on {nodes} nodes"))
            self._multi_node = (self.spec.nproc // nodes, self.out_dir / "torchrun")
            return argv
        self._pending.append(ev.Progress("starting", f"torchrun: {self.spec.nproc} processes"))
        return torchrun_command(self.spec.nproc, self.out_dir / "torchrun", argv)

    def start(self, hold: bool = False) -> None:
        """Start the child. With `hold` it imports what it needs and then waits (see `worker.hold`):
        `wait_ready()` returns once it has, and `events()` lets it go."""
        argv = self.command()
        if argv is None:
            self._refused = True
            return
        if hold and self.executor is None:
            if self._nsys is not None:
                raise ValueError("a launch under nsys cannot be held: nsys would record the wait")
            if self.spec.nproc > 1:
                raise ValueError("a torchrun job cannot be held: its ranks share one stdin")
            argv = [*argv, "--hold"]
        self._held = hold and self.executor is None  # a job queues: there is no turn to hold it for
        if self._start_warm(argv):
            return
        try:
            self.spawn(argv, self._multi_node)
        except ValueError as exc:  # Slurm refused the job (sbatch's own words): this cell's error
            if self.executor is None:
                raise
            self._pending += [ev.Error("slurm", str(exc)), ev.Finished("error")]
            self._refused = True

    def _cold_reason(self, argv: list[str]) -> str | None:
        """Why this launch cannot be forked from a warm process, or None."""
        if self.executor is not None:
            return "a Slurm job"
        if self._nsys is not None:
            return "nsys wraps the worker"
        if argv[:2] != [sys.executable, "-m"]:
            return f"{Path(argv[0]).name} wraps the worker"
        return None

    def _start_warm(self, argv: list[str]) -> bool:
        """Fork the worker from a warm process (core.launch.warm) where that can be trusted; else say why
        not in the child's environment (the record's `start`) and return False: it starts cold."""
        from perfconsole.core.launch import warm

        why = self._cold_reason(argv)
        if why is None:
            proc, why = warm.spawn(argv, self.environment())
            if proc is not None:
                self.start_how = "warm"
                self.adopt(proc)
                if self.cancelled.is_set():  # cancelled while it waited for the console's warm process to be ready
                    self._signal_group(signal.SIGKILL)
                return True
        self.start_how = f"cold: {why}"
        self.env = {**(self.env or {}), warm.START_VAR: self.start_how}
        return False

    def _need_out_dir(self) -> Path:
        if self.out_dir is None:
            from perfconsole.core.paths import runs_dir
            from perfconsole.core.record import new_id

            self.out_dir = runs_dir() / new_id()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return self.out_dir

    def wait_ready(self) -> None:
        """Block until a held child is ready for its turn, or has ended (`events()` then says how)."""
        if not self._held or self.proc is None or self.proc.stdout is None:
            return
        for line in self.proc.stdout:
            self._early.append(line)
            if _is_held(line):
                return

    # --- the stream ----------------------------------------------------------------------------
    def events(self) -> Iterator[ev.Event]:
        if self.proc is None and not self._refused:
            self.start()
        yield from self._pending
        if self._refused:
            return
        assert self.proc and self.proc.stdout
        if self._held:
            self._go()
        finished: ev.Finished | None = None
        try:
            for line in itertools.chain(self._early, self.proc.stdout):
                event, others = events_in(line)
                self.other_stdout += others  # nsys's own messages share the pipe
                if event is None:
                    continue
                if isinstance(event, ev.Progress) and event.stage == ev.HELD:
                    continue
                yield from self._telemetry.see(event)
                if isinstance(event, ev.Finished):
                    finished = event  # held back: post-processing may still add events
                else:
                    yield event
            code = self.proc.wait()
        finally:
            self.forget()
            stopped = self._telemetry.stop()
        yield from stopped
        if self.executor is not None:
            yield self.proc.placed()
        if finished is None:
            yield from self._unexpected_end(code)
            return
        if self._nsys is not None and finished.status == "ok":
            if self.spec.nproc > 1:
                self._rep_base = self.out_dir / "profile-rank0"  # type: ignore[operator]
            yield from self._nsys_tables()
        yield finished

    def _go(self) -> None:
        assert self.proc and self.proc.stdin
        try:
            self.proc.stdin.write("go\n")
            self.proc.stdin.flush()
        except (OSError, ValueError):  # it has died already; the stream will say how
            pass

    def _unexpected_end(self, code: int) -> Iterator[ev.Event]:
        tail = "\n".join(self.stderr_tail)
        if self.cancelled.is_set():
            yield ev.Error("cancelled", "stopped before its last step (a signal, or the user)", tail)
            yield ev.Finished("cancelled")
            return
        ended = self.proc.ended_by_slurm() if self.executor is not None else None
        if ended is not None:  # time limit, preemption, node failure, host OOM: Slurm's state and reason
            yield ev.Error("slurm", ended, tail)
            yield ev.Finished("error")
            return
        if self.spec.nproc > 1 and self.out_dir is not None:
            from perfconsole.core.launch.torchrun import failure_events

            yield from failure_events(self.out_dir / "torchrun", code, list(self.stderr_tail))
            return
        if code < 0:
            from perfconsole.core.launch.torchrun import SIGKILL_WORDS

            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            msg = f"worker killed by signal {name}" + (SIGKILL_WORDS if name == "SIGKILL" else "")
        else:
            msg = f"worker exited with code {code} before finishing"
        last = next((ln for ln in reversed(self.stderr_tail) if ln.strip()), "")
        yield ev.Error("crash", f"{msg}{': ' + last if last else ''}", tail)
        yield ev.Finished("error")

    def _nsys_tables(self) -> Iterator[ev.Event]:
        from perfconsole.core.launch.nsys import stats_events

        assert self._rep_base is not None and self.out_dir is not None and self._nsys is not None
        for event in stats_events(self._nsys, self._rep_base, self.out_dir, self.other_stdout):
            if isinstance(event, ev.ProfileReady) and self.spec.nproc > 1:  # the tables are rank 0's
                others = [str(self.out_dir / f"profile-rank{k}.nsys-rep") for k in range(1, self.spec.nproc)]
                event = dataclasses.replace(event, files=[*event.files, *others])
            yield event


# Every event line begins so (events.Event.to_json: "v" is the first key).
_EVENT_START = '{"v": '


def events_in(line: str) -> tuple[ev.Event | None, list[str]]:
    """The event in one line of the child's stdout, and the text around it that is not an event.

    Under nsys the pipe is shared: nsys prints its report's progress bar without a line end while the worker
    goes on, so an event can arrive glued after nsys's text (a 2.7B nsys run on an H200 lost its profile
    overhead event so). The event is found where it begins and decoded alone; the rest is kept as nsys's."""
    line = line.strip()
    if line.startswith(_EVENT_START):
        try:
            return ev.decode(line), []
        except ev.EventError:
            pass
    start = line.find(_EVENT_START)
    if start < 0:
        return None, [line] if line else []
    try:
        obj, end = json.JSONDecoder().raw_decode(line, start)
        event = ev.from_obj(obj)
    except (ValueError, ev.EventError):
        return None, [line]
    others = [part.strip() for part in (line[:start], line[end:]) if part.strip()]
    return event, others


def _is_held(line: str) -> bool:
    if not line.lstrip().startswith("{"):
        return False
    try:
        event = ev.decode(line.strip())
    except ev.EventError:
        return False
    return isinstance(event, ev.Progress) and event.stage == ev.HELD


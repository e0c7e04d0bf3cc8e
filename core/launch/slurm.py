"""Processes as Slurm jobs: `SlurmExecutor.spawn(argv)` submits the command line a local launch would
run (through submitit, whose own CommandFunction is all it pickles) and returns a `SlurmJob` that
stands where a `subprocess.Popen` stands in core.launch.processes: its stdout and stderr are the job's
log files, tailed as the job writes them, `wait()` returns once Slurm says the job has ended, and a
signal is `scancel`. So a Launch over Slurm streams the very events a local one does, and a grid never
knows which ran it.

One poller thread per executor asks `sacct` (Slurm's accounting, what submitit reads too) for the
state of every live job, so N jobs cost one sacct call a poll, and the counts of pending, running and
done jobs come from the same answer. With `array_parallelism` the jobs spawned together go as one job
array, N tasks at a time: as many as the grid said to `expect`, or those that came within
ARRAY_GATHER_S of each other.
"""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfconsole.core import events as ev
from perfconsole.core.launch.slurm_limits import settle_time
from perfconsole.core.launch.slurm_options import SlurmOptionError, SlurmOptions

POLL_S = 0.5
TAIL_S = 0.2
ARRAY_GATHER_S = 5.0        # the longest wait for the rest of an array's cells after the last came
GONE_AFTER_CANCEL_S = 30.0   # a cancelled job sacct never reports is taken as ended after this
ACTIVE = {"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "CONFIGURING", "COMPLETING", "REQUEUE_HOLD",
          "REQUEUE_FED", "STAGE_OUT", "SIGNALING", "RESV_DEL_HOLD"}
SACCT_FIELDS = ("JobID", "State", "Reason", "NodeList", "Submit", "Start", "End", "ExitCode")


@dataclass
class JobInfo:
    """What sacct last said of one job."""
    state: str = "PENDING"
    reason: str | None = None
    nodes: str = ""
    submit: str = ""
    start: str = ""
    end: str = ""
    exit_code: str = "0:0"

    @property
    def ended(self) -> bool:
        return self.state not in ACTIVE


def _seconds(a: str, b: str) -> float | None:
    try:
        return max((dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds(), 0.0)
    except ValueError:  # "Unknown", "None": not started or not ended
        return None


def parse_sacct(text: str) -> dict[str, JobInfo]:
    """sacct -P -n -X -o SACCT_FIELDS lines -> {job id: JobInfo}; "CANCELLED by 0" becomes CANCELLED."""
    out: dict[str, JobInfo] = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < len(SACCT_FIELDS):
            continue
        jid, state, reason, nodes, submit, start, end, code = parts[:len(SACCT_FIELDS)]
        out[jid] = JobInfo(state.split()[0] if state else "PENDING", None if reason in ("", "None") else reason,
                           "" if nodes.startswith("None") else nodes, submit, start, end, code)
    return out


@dataclass
class _Gathered:
    argv: list[str]
    done: threading.Event = field(default_factory=threading.Event)
    job: Any = None
    error: BaseException | None = None


class SlurmExecutor:
    """Submits processes as Slurm jobs with one set of options, and watches them."""

    def __init__(self, options: SlurmOptions, folder: Path | None = None) -> None:
        try:
            import submitit
        except ImportError:
            raise SlurmOptionError("--executor slurm needs submitit: pip install 'perfconsole[slurm]'") from None
        from perfconsole.core.paths import data_dir

        # Never submitted without a time limit: submitit would ask for its own 5 minutes.
        self.options = options if options.time is not None else settle_time(options)
        self.folder = Path(options.folder or folder or data_dir() / "slurm").expanduser().resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._submitit = submitit
        self._lock = threading.Lock()
        self._jobs: dict[str, SlurmJob] = {}
        self._info: dict[str, JobInfo] = {}
        self._gather: list[_Gathered] = []
        self._gather_timer: threading.Timer | None = None
        self._expect = 0
        self._poller: threading.Thread | None = None

    def expect(self, n: int) -> None:
        """The next `n` spawns are one grid's cells: with array_parallelism, one array of n tasks."""
        with self._lock:
            self._expect = n

    @property
    def nodes(self) -> int:
        return self.options.nodes

    # --- submitting ----------------------------------------------------------------------------
    def _executor(self, nodes: int = 1) -> Any:
        """submitit's executor for a job of `nodes` nodes, one task (one process, or one torchrun) each."""
        o = self.options
        ex = self._submitit.SlurmExecutor(folder=self.folder, max_num_timeout=0)
        params: dict[str, Any] = {"job_name": "perfconsole", "nodes": nodes, "ntasks_per_node": 1,
                                  "cpus_per_task": 1, "signal_delay_s": 0, "stderr_to_stdout": False}
        for key in ("partition", "account", "qos", "constraint", "gpus_per_node"):
            if getattr(o, key):
                params[key] = getattr(o, key)
        if o.array_parallelism:
            params["array_parallelism"] = o.array_parallelism
        # Keys as submitit spells them, so a pass-through option replaces a value set above.
        extra = {k.replace("-", "_"): v for k, v in o.options.items()}
        ex.update_parameters(**params, additional_parameters={"time": o.time, **extra})
        return ex

    def spawn(self, argv: list[str], env: dict[str, str] | None = None,
              torchrun: tuple[int, Path] | None = None) -> SlurmJob:
        """Submit `argv` as one job (its tasks: one per node with `torchrun`, else one) and return it."""
        wrapped = [sys.executable, "-m", "perfconsole.core.launch.slurm_task", "--where", str(self.folder)]
        for k, v in (env or {}).items():
            wrapped += ["--env", f"{k}={v}"]
        if torchrun is not None:
            wrapped += ["--torchrun", str(torchrun[0]), str(torchrun[1])]
        wrapped += ["--", *argv]
        ntasks = self.options.nodes if torchrun is not None else 1
        if self.options.array_parallelism and torchrun is None:
            submitted = self._submit_gathered(wrapped)
        else:
            submitted = self._submit_now(wrapped, ntasks)
        job = SlurmJob(self, str(submitted.job_id), ntasks)
        with self._lock:
            self._jobs[job.job_id] = job
        self._ensure_poller()
        return job

    def _submit_now(self, wrapped: list[str], nodes: int) -> Any:
        func = self._submitit.helpers.CommandFunction(wrapped, verbose=True)
        try:
            return self._executor(nodes).submit(func)
        except Exception as exc:  # sbatch refused it: Slurm's own last words
            raise SlurmOptionError(f"slurm refused the job: {_last_line(exc)}") from None

    def _submit_gathered(self, wrapped: list[str]) -> Any:
        """Wait up to ARRAY_GATHER_S for other cells to join, then submit them all as one array."""
        item = _Gathered(wrapped)
        with self._lock:
            self._gather.append(item)
            if self._gather_timer is not None:
                self._gather_timer.cancel()
            full = len(self._gather) >= self._expect
            if not full:
                self._gather_timer = threading.Timer(ARRAY_GATHER_S, self._flush_array)
                self._gather_timer.daemon = True
                self._gather_timer.start()
        if full:
            self._flush_array()
        item.done.wait()
        if item.error is not None:
            raise item.error
        return item.job

    def _flush_array(self) -> None:
        with self._lock:
            batch, self._gather = self._gather, []
            self._expect = max(self._expect - len(batch), 0)
        if not batch:
            return
        ex = self._executor()
        try:
            with ex.batch():
                jobs = [ex.submit(self._submitit.helpers.CommandFunction(b.argv, verbose=True)) for b in batch]
        except Exception as exc:
            error = SlurmOptionError(f"slurm refused the job array: {_last_line(exc)}")
            for b in batch:
                b.error = error
                b.done.set()
            return
        for b, job in zip(batch, jobs):
            b.job = job
            b.done.set()

    # --- watching ------------------------------------------------------------------------------
    def _ensure_poller(self) -> None:
        with self._lock:
            if self._poller is None or not self._poller.is_alive():
                self._poller = threading.Thread(target=self._poll, daemon=True, name="slurm-sacct")
                self._poller.start()

    def _poll(self) -> None:
        while True:
            with self._lock:
                live = [j for j in self._jobs if not self._info.get(j, JobInfo()).ended]
            if not live:
                return
            try:
                out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(live), "-o", ",".join(SACCT_FIELDS)],
                                     capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            found = parse_sacct(out)
            with self._lock:
                for jid in live:
                    if jid in found:
                        self._info[jid] = found[jid]
                    elif self._jobs[jid].gone_since is not None and \
                            time.monotonic() - self._jobs[jid].gone_since > GONE_AFTER_CANCEL_S:
                        self._info[jid] = JobInfo("CANCELLED")
            time.sleep(POLL_S)

    def info(self, job_id: str) -> JobInfo:
        with self._lock:
            return self._info.get(job_id, JobInfo())

    def counts(self) -> dict[str, int]:
        """Jobs pending, running and done, as the last poll saw them."""
        out = {"pending": 0, "running": 0, "done": 0}
        with self._lock:
            for jid in self._jobs:
                state = self._info.get(jid, JobInfo()).state
                out["pending" if state == "PENDING" else "done" if state not in ACTIVE else "running"] += 1
        return out

    def cancel_all(self) -> None:
        """scancel every job not known to have ended: nothing is left queued or running."""
        with self._lock:
            live = [j for j in self._jobs.values() if not self._info.get(j.job_id, JobInfo()).ended]
        for job in live:
            job.cancel()


class SlurmJob:
    """One submitted job, shaped as core.launch.processes expects a Popen: stdout, stderr, wait, poll."""

    def __init__(self, executor: SlurmExecutor, job_id: str, ntasks: int) -> None:
        self.executor = executor
        self.job_id = job_id
        self.ntasks = ntasks
        self.pid: int | None = None
        self.stdin = None
        self.gone_since: float | None = None
        folder = executor.folder
        self.stdout = self._tail([folder / f"{job_id}_{t}_log.out" for t in range(ntasks)])
        self.stderr = self._tail([folder / f"{job_id}_{t}_log.err" for t in range(ntasks)])

    @property
    def info(self) -> JobInfo:
        return self.executor.info(self.job_id)

    def _tail(self, paths: list[Path]) -> Iterator[str]:
        """The files' complete lines as they are written, until the job has ended and all is read."""
        offsets = [0] * len(paths)
        partial = [""] * len(paths)
        while True:
            ended = self.info.ended
            got = False
            for k, path in enumerate(paths):
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        f.seek(offsets[k])
                        chunk = f.read()
                        offsets[k] = f.tell()
                except FileNotFoundError:
                    continue
                if chunk:
                    got = True
                    *lines, partial[k] = (partial[k] + chunk).split("\n")
                    for line in lines:
                        yield line + "\n"
            if ended and not got:
                for rest in partial:
                    if rest:
                        yield rest
                return
            if not got:
                time.sleep(TAIL_S)

    def poll(self) -> int | None:
        return self.returncode() if self.info.ended else None

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.info.ended:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"slurm job {self.job_id}", timeout or 0)
            time.sleep(TAIL_S)
        return self.returncode()

    def returncode(self) -> int:
        """0 for COMPLETED; else the exit code, or minus the signal, sacct gives (1 if neither)."""
        info = self.info
        if info.state == "COMPLETED":
            return 0
        code, _, sig = info.exit_code.partition(":")
        if sig.isdigit() and int(sig):
            return -int(sig)
        return int(code) if code.isdigit() and int(code) else 1

    def cancel(self) -> None:
        """scancel: Slurm signals the job's processes, then kills them after KillWait."""
        if self.gone_since is None:
            self.gone_since = time.monotonic()
        subprocess.run(["scancel", self.job_id], capture_output=True, text=True, timeout=30)

    def ended_by_slurm(self) -> str | None:
        """Why the job ended, when Slurm (not the worker) ended it: TIMEOUT, PREEMPTED, NODE_FAIL..."""
        info = self.info
        if info.state in ("COMPLETED", "FAILED"):
            return None
        where = f" on {info.nodes}" if info.nodes else ""
        return f"slurm job {self.job_id}{where} ended {info.state}" + (f" ({info.reason})" if info.reason else "")

    def placed(self) -> ev.Placed:
        """The job as the record keeps it: id, node(s), GPUs, Slurm's final state, queue and run time."""
        info = self.info
        nodes, gpus = [], []
        for t in range(self.ntasks):
            try:
                where = json.loads((self.executor.folder / f"{self.job_id}_{t}_where.json").read_text())
            except (OSError, ValueError):
                continue
            nodes.append(str(where.get("node")))
            if where.get("gpus"):
                gpus.append(str(where["gpus"]))
        if not nodes and info.nodes:
            nodes = [info.nodes]
        return ev.Placed("slurm", self.job_id, info.state, sorted(set(nodes)), ";".join(gpus) or None,
                         info.reason, _seconds(info.submit, info.start), _seconds(info.start, info.end),
                         str(self.executor.folder / f"{self.job_id}_0_log.out"), self.executor.options.time,
                         self.executor.options.time_from)


def _last_line(exc: BaseException) -> str:
    text = str(exc)
    for attr in ("stderr", "output"):
        value = getattr(exc, attr, None)
        if value:
            text = value.decode() if isinstance(value, bytes) else str(value)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__

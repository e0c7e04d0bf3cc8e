"""`--executor local|slurm` for the measuring commands (run, compare, sweep, attention, ladder).

The flags and config files are read by core.launch.slurm_options; here they become the executor a
command hands its launches, after Slurm has said it would take such a job (`sbatch --test-only`), so
bad input (no sbatch, an unknown partition or account, a time limit Slurm rejects, a config file that
does not parse) is one line and exit 2 before anything is submitted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from perfconsole.core.cli.main import UsageError
from perfconsole.core.launch.slurm_limits import settle_time, time_line
from perfconsole.core.launch.slurm_options import (SlurmOptionError, add_executor_arguments, check_with_slurm,
                                                   options_from_args)

__all__ = ["add_executor_arguments", "executor_from_args", "is_remote", "jobs_text", "job_where", "nodes_note"]


def is_remote(args: argparse.Namespace) -> bool:
    """Whether the processes run elsewhere (this machine's GPUs then do not matter)."""
    return getattr(args, "executor", "local") == "slurm"


def executor_from_args(args: argparse.Namespace, nproc: int = 1, device: str = "cpu",
                       folder: Path | None = None) -> Any:
    """None for --executor local; else a checked core.launch.slurm.SlurmExecutor. `nproc` and
    `device` size the job: on cuda each node asks for its processes' GPUs unless told otherwise. With
    no time limit given, the jobs take their partition's (core.launch.slurm_limits), and a line on
    stderr says which."""
    try:
        opts = options_from_args(args)
        if opts is None:
            return None
        if opts.nodes > 1 and (nproc < opts.nodes or nproc % opts.nodes):
            raise SlurmOptionError(f"--nodes {opts.nodes}: --nproc must be a multiple of it (N/M processes on "
                                   f"each node), not {nproc}")
        if device == "cuda" and opts.gpus_per_node is None:
            from dataclasses import replace

            opts = replace(opts, gpus_per_node=max(1, nproc // opts.nodes))
        opts = settle_time(opts, "--slurm-time" if args.slurm_time is not None else "the slurm config's time")
        check_with_slurm(opts)
        from perfconsole.core.launch.slurm import SlurmExecutor

        executor = SlurmExecutor(opts, folder)
        if args.slurm_time is None:
            print(time_line(opts), file=sys.stderr, flush=True)
        return executor
    except SlurmOptionError as exc:
        raise UsageError(str(exc)) from None


def jobs_text(counts: dict[str, int] | None) -> str:
    """"slurm: 2 pending, 3 running, 5 done" for a progress line ("" without Slurm)."""
    if not counts:
        return ""
    return f"slurm: {counts['pending']} pending, {counts['running']} running, {counts['done']} done"


def nodes_note(record: Any) -> str:
    """A line for a run whose processes Slurm placed on more than one node ("" otherwise): the spread
    between them then holds the nodes' differences too."""
    nodes = sorted({n for j in getattr(record, "jobs", []) for n in j.get("nodes", [])})
    if len(nodes) < 2 or len(record.jobs) < 2:
        return ""
    return (f"\nthe {len(record.jobs)} processes ran on {len(nodes)} nodes ({', '.join(nodes)}): the interval between "
            "them includes node-to-node differences")


def job_where(cell: Any) -> str:
    """" (job 123 on node1, GPU 0, TIMEOUT)" for a finished cell that ran as a job ("" otherwise)."""
    jobs = getattr(cell, "jobs", None)
    if not jobs:
        return ""
    j = jobs[-1]
    parts = [f"job {j['job_id']}" + (f" on {','.join(j['nodes'])}" if j.get("nodes") else "")]
    if j.get("gpus"):
        parts.append(f"GPU {j['gpus']}")
    if j.get("queued_s") is not None:
        parts.append(f"queued {j['queued_s']:.0f} s")
    if j.get("state") != "COMPLETED":
        parts.append(str(j.get("state")))
    return f" ({', '.join(parts)})"

"""What a Slurm job runs on each of its tasks (core.launch.slurm submits it through submitit's own
CommandFunction): the worker's command line, unchanged, after three things only the job can know.

- Where it landed: the node and the GPUs Slurm gave it go to `<job id>_<task>_where.json` beside
  submitit's logs, so the parent can name them in the record.
- The environment the parent's launch asked for (`--env K=V`): set here, since the job's own
  environment is Slurm's (the submitting shell's, plus SLURM_*), and must stay so.
- A job over several nodes (`--torchrun NPROC LOGDIR`): each task is one node's torchrun agent, all of
  them meeting at a c10d rendezvous on the job's first node, on a port chosen from the job id.

The worker runs as this process's child, its stdin a pipe held open here (the worker ends when its
stdin does). Its JSON event lines reach this process's stdout, which srun writes to the task's log that
the parent tails; only rank 0 prints events, so the tasks' logs together hold one stream.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

RDZV_PORT_BASE = 29400
RDZV_PORT_SPAN = 20000


def job_id() -> str:
    """The id submitit and sacct use: `<array id>_<index>` for an array task, else the job id."""
    array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{index}" if array and index else os.environ.get("SLURM_JOB_ID", "0")


def first_node() -> str:
    """The job's first host name (the rendezvous host), from Slurm's compressed node list."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST", "")
    if nodelist:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True)
        names = out.stdout.split()
        if names:
            return names[0]
    return socket.gethostname()


def torchrun_argv(nproc_per_node: int, log_dir: str, argv: list[str]) -> list[str]:
    """torchrun as one node's agent of a multi-node job (compare core.launch.torchrun, one node)."""
    jid = os.environ.get("SLURM_JOB_ID", "0")
    port = RDZV_PORT_BASE + int(jid) % RDZV_PORT_SPAN if jid.isdigit() else RDZV_PORT_BASE
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", os.environ.get("SLURM_NTASKS", "1"),
            "--nproc-per-node", str(nproc_per_node), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{first_node()}:{port}", "--rdzv-id", f"perfconsole-{jid}",
            "--max-restarts", "0", "--monitor-interval", "0.5", "--log-dir", log_dir, "--no-python", *argv]


def main(args: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="perfconsole.core.launch.slurm_task")
    p.add_argument("--where", required=True, help="the folder for <job id>_<task>_where.json")
    p.add_argument("--env", action="append", default=[], metavar="K=V")
    p.add_argument("--torchrun", nargs=2, default=None, metavar=("NPROC_PER_NODE", "LOG_DIR"))
    p.add_argument("argv", nargs=argparse.REMAINDER)
    ns = p.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    task = os.environ.get("SLURM_PROCID", "0")
    where = {"node": socket.gethostname(), "task": int(task),
             "gpus": os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("SLURM_JOB_GPUS")}
    path = Path(ns.where) / f"{job_id()}_{task}_where.json"
    path.write_text(json.dumps(where), encoding="utf-8")
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in ns.env if "=" in kv)
    env["PYTHONUNBUFFERED"] = "1"
    if ns.torchrun is not None:
        argv = torchrun_argv(int(ns.torchrun[0]), ns.torchrun[1], argv)
    sys.stdout.flush()
    # The worker takes the end of its stdin for its launcher's death (core.measure.worker), and a
    # job's stdin is /dev/null: this process holds a pipe open for it instead, until the worker ends.
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, lambda signum, _frame: child.send_signal(signum))
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main())

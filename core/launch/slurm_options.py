"""What a Slurm job asks for: the `--executor slurm` flags, their defaults from config files, and a
check with Slurm itself (`sbatch --test-only`) before anything is submitted.

Defaults come from two TOML files, the later winning, and the flags win over both:
  ~/.config/perfconsole/slurm.toml   (or $XDG_CONFIG_HOME/...; keys at the top level or under [slurm])
  ./perfconsole.toml                 (the project folder's; keys under [slurm])
Keys: partition, account, qos, time, gpus_per_node, constraint, array_parallelism, folder, and
`options`, a table of any other sbatch option (`options = { mem = "16G", exclusive = true }`).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

EXECUTORS = ("local", "slurm")
PROJECT_FILE = "perfconsole.toml"
KEYS = ("partition", "account", "qos", "time", "gpus_per_node", "constraint", "array_parallelism", "folder",
        "options")
TEST_ONLY_TIMEOUT_S = 30


class SlurmOptionError(ValueError):
    """Bad Slurm input (a flag, a config file, or what Slurm itself refused): one line, exit 2."""


@dataclass(frozen=True)
class SlurmOptions:
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time: str | None = None                  # Slurm's formats: minutes, MM:SS, HH:MM:SS, D-HH:MM; None:
                                             # the partition's (core.launch.slurm_limits settles it)
    gpus_per_node: int | None = None
    constraint: str | None = None
    array_parallelism: int | None = None     # None: one job per cell; N: one job array, N tasks at a time
    folder: str | None = None                # submitit's job files (default: the data dir's slurm/)
    options: dict[str, Any] = field(default_factory=dict)   # any other sbatch option, without --
    nodes: int = 1                           # `run` only: a torchrun job over this many nodes
    time_from: str | None = None             # whose the time is: the flag, a config file, the partition

    def sbatch_flags(self, ntasks_per_node: int | None = None) -> list[str]:
        """The options as sbatch flags (what --test-only checks; submitit writes the same), the
        pass-through options last, so that they win."""
        out = [f"--time={self.time}"] if self.time else []
        for key in ("partition", "account", "qos", "constraint"):
            value = getattr(self, key)
            if value:
                out.append(f"--{key}={value}")
        if self.gpus_per_node:
            out.append(f"--gpus-per-node={self.gpus_per_node}")
        if self.nodes > 1:
            out.append(f"--nodes={self.nodes}")
        if ntasks_per_node is not None:
            out.append(f"--ntasks-per-node={ntasks_per_node}")
        for key, value in self.options.items():
            out.append(f"--{key}" if value is True else f"--{key}={value}")
        return out


def config_paths(cwd: Path | None = None) -> list[Path]:
    """The user's file, then the project folder's: later ones override earlier ones."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return [base / "perfconsole" / "slurm.toml", (cwd or Path.cwd()) / PROJECT_FILE]


def read_config(path: Path) -> dict[str, Any]:
    """The [slurm] keys of one file ({} if it does not exist); a file that does not parse or holds an
    unknown key is a SlurmOptionError naming the file (and tomllib's line and column)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SlurmOptionError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SlurmOptionError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("slurm", data if path.name != PROJECT_FILE else {})
    if not isinstance(table, dict):
        raise SlurmOptionError(f"{path}: [slurm] must be a table")
    table = {k: v for k, v in table.items() if k != "slurm"}
    for key, value in table.items():
        if key not in KEYS:
            raise SlurmOptionError(f"{path}: unknown key {key!r} in [slurm]; known: {', '.join(KEYS)}")
        if key == "options" and not isinstance(value, dict):
            raise SlurmOptionError(f"{path}: options must be a table, e.g. options = {{ mem = \"16G\" }}")
        if key in ("gpus_per_node", "array_parallelism") and (not isinstance(value, int) or value < 1):
            raise SlurmOptionError(f"{path}: {key} must be a whole number of at least 1, not {value!r}")
    return table


def from_config(paths: list[Path] | None = None) -> SlurmOptions:
    merged: dict[str, Any] = {}
    for path in paths if paths is not None else config_paths():
        table = read_config(path)
        merged.update({k: v for k, v in table.items() if k != "options"})
        merged["options"] = {**merged.get("options", {}), **table.get("options", {})}
    if "time" in merged:
        merged["time"] = str(merged["time"])
    return SlurmOptions(**merged)


def add_executor_arguments(p: argparse.ArgumentParser, nodes: bool = False) -> None:
    """`--executor` and the Slurm flags; `nodes` adds `--nodes` (for `run`)."""
    p.add_argument("--executor", default="local", choices=EXECUTORS,
                   help="where the processes run: local child processes, or one Slurm job each (submitit)")
    p.add_argument("--slurm-partition", default=None, metavar="NAME")
    p.add_argument("--slurm-account", default=None, metavar="NAME")
    p.add_argument("--slurm-qos", default=None, metavar="NAME")
    p.add_argument("--slurm-time", default=None, metavar="TIME",
                   help="each job's time limit in Slurm's formats: minutes, HH:MM:SS, D-HH:MM (default: the "
                        "partition's DefaultTime, else 60 minutes or its MaxTime if lower)")
    p.add_argument("--slurm-gpus-per-node", type=int, default=None, metavar="N")
    p.add_argument("--slurm-constraint", default=None, metavar="FEATURES")
    p.add_argument("--slurm-option", action="append", default=[], metavar="KEY=VALUE",
                   help="any other sbatch option, e.g. mem=16G or exclusive (repeatable)")
    p.add_argument("--slurm-array-parallelism", type=int, default=None, metavar="N",
                   help="submit a grid's cells as one job array, N tasks at a time")
    p.add_argument("--slurm-folder", default=None, metavar="DIR",
                   help="submitit's job files and logs, on a file system the nodes share")
    if nodes:
        p.add_argument("--nodes", type=int, default=None, metavar="M",
                       help="with --executor slurm and --nproc N: one job over M nodes, N/M processes on "
                            "each, torchrun on every node with a c10d rendezvous")


def options_from_args(args: argparse.Namespace, config: list[Path] | None = None) -> SlurmOptions | None:
    """The SlurmOptions the flags and config files give, checked; None with --executor local."""
    nodes = getattr(args, "nodes", None)
    if args.executor != "slurm":
        if nodes is not None:
            raise SlurmOptionError("--nodes needs --executor slurm (one machine runs a job on one node)")
        return None
    opts = from_config(config)
    extra = dict(opts.options)
    for item in args.slurm_option:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-")
        if not key:
            raise SlurmOptionError(f"--slurm-option: give KEY=VALUE or KEY, not {item!r}")
        extra[key] = value if sep else True
    flags = {"partition": args.slurm_partition, "account": args.slurm_account, "qos": args.slurm_qos,
             "time": args.slurm_time, "gpus_per_node": args.slurm_gpus_per_node,
             "constraint": args.slurm_constraint, "array_parallelism": args.slurm_array_parallelism,
             "folder": args.slurm_folder}
    opts = replace(opts, options=extra, nodes=nodes or 1, **{k: v for k, v in flags.items() if v is not None})
    for name in ("gpus_per_node", "array_parallelism", "nodes"):
        value = getattr(opts, name)
        if value is not None and value < 1:
            raise SlurmOptionError(f"--{'slurm-' if name != 'nodes' else ''}{name.replace('_', '-')}: "
                                   f"give at least 1, not {value}")
    return opts


def check_with_slurm(opts: SlurmOptions, ntasks: int = 1) -> None:
    """Ask Slurm whether it would take a job with these options (`sbatch --test-only`, which submits
    nothing): no sbatch, or an unknown partition, account, qos or a time limit it rejects, is a
    SlurmOptionError carrying Slurm's own last line."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise SlurmOptionError("--executor slurm: sbatch is not on PATH (install Slurm's client commands, "
                               "or run with --executor local)")
    argv = [sbatch, "--test-only", *opts.sbatch_flags(ntasks), "--wrap=true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TEST_ONLY_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SlurmOptionError(f"--executor slurm: sbatch --test-only gave no answer in {TEST_ONLY_TIMEOUT_S} s "
                               "(is slurmctld up?)") from None
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        raise SlurmOptionError(f"slurm refused the job: {lines[-1] if lines else f'sbatch exit {done.returncode}'}")


def option_names() -> list[str]:
    return [f.name for f in fields(SlurmOptions)]

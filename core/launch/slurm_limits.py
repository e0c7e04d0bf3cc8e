"""The time limit a Slurm job asks for, held against its partition's own limits.

A partition has a MaxTime (a job asking for more is refused, or pends forever where the cluster does
not enforce partition limits at submission) and may have a DefaultTime (what a job that names no limit
gets). They are read from `scontrol -a -o show partition` (or, where that fails, `sinfo`):

- no time given (no --slurm-time, no `time` in a config file): the partition's DefaultTime; without
  one, perfconsole's DEFAULT_TIME, or the partition's MaxTime where that is lower;
- a time given that is over the MaxTime: a SlurmOptionError naming the limit, before anything is
  submitted.

Where the limits cannot be read (no scontrol, an unknown partition) nothing is refused here and the
default is DEFAULT_TIME: `sbatch --test-only` still has the last word.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass, replace

from perfconsole.core.launch.slurm_options import SlurmOptionError, SlurmOptions

DEFAULT_TIME = "60"              # minutes, where the partition says nothing lower
READ_TIMEOUT_S = 20
_UNLIMITED = ("unlimited", "infinite", "-1")
_NO_DEFAULT = ("none", "n/a", "")


def minutes(text: str) -> int | None:
    """A Slurm time limit in minutes, seconds rounded up as Slurm does (30:30 is 31); None for no limit
    (UNLIMITED, infinite, or 0, which asks for none). ValueError for text in none of Slurm's formats:
    minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS."""
    t = text.strip()
    if t.lower() in _UNLIMITED:
        return None
    days, sep, rest = t.partition("-")
    if not sep:
        days, rest = "0", t
    parts = rest.split(":")
    if not all(p.isdigit() for p in (days, *parts)) or len(parts) > 3:
        raise ValueError(f"not a Slurm time limit: {text!r}")
    nums = [int(p) for p in parts]
    if sep:                # D-HH, D-HH:MM, D-HH:MM:SS
        h, m, s = (nums + [0, 0])[:3]
    elif len(nums) == 1:   # M
        h, m, s = 0, nums[0], 0
    elif len(nums) == 2:   # M:SS
        h, m, s = 0, *nums
    else:                  # H:M:S
        h, m, s = nums
    total = int(days) * 1440 + h * 60 + m + (1 if s else 0)
    return total or None


@dataclass(frozen=True)
class Partition:
    """One partition's time limits, as Slurm writes them (None: no limit, or no default)."""
    name: str
    default: bool = False
    default_time: str | None = None
    max_time: str | None = None


def _limit(value: str) -> str | None:
    return None if value.strip().lower() in _UNLIMITED else value.strip()


def _default(value: str) -> str | None:
    return None if value.strip().lower() in _NO_DEFAULT else value.strip()


def parse_scontrol(text: str) -> dict[str, Partition]:
    """`scontrol show partition` (one line a partition with -o, or its multi-line form) -> {name: Partition}."""
    out: dict[str, Partition] = {}
    record: dict[str, str] = {}

    def flush() -> None:
        if "PartitionName" in record:
            name = record["PartitionName"]
            out[name] = Partition(name, record.get("Default") == "YES", _default(record.get("DefaultTime", "NONE")),
                                  _limit(record.get("MaxTime", "UNLIMITED")))

    for token in text.split():
        key, sep, value = token.partition("=")
        if not sep:
            continue
        if key == "PartitionName":
            flush()
            record = {}
        record[key] = value
    flush()
    return out


def parse_sinfo(text: str) -> dict[str, Partition]:
    """`sinfo -h -o %P|%l|%L` (name, * after the default one; time limit; default time) -> {name: Partition}."""
    out: dict[str, Partition] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[0]:
            continue
        name = parts[0].rstrip("*")
        out.setdefault(name, Partition(name, parts[0].endswith("*"), _default(parts[2]), _limit(parts[1])))
    return out


def read_partitions() -> dict[str, Partition]:
    """Every partition's limits, hidden ones too, from scontrol or else sinfo ({} if neither answers)."""
    for argv, parse in ((["scontrol", "-a", "-o", "show", "partition"], parse_scontrol),
                        (["sinfo", "-a", "-h", "-o", "%P|%l|%L"], parse_sinfo)):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=READ_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and (found := parse(done.stdout)):
            return found
    return {}


def _wanted(opts: SlurmOptions, partitions: dict[str, Partition]) -> Partition | None:
    """The limits the job meets: its partition's (the cluster's default one when it names none); of a
    list of partitions, the lowest of each (a job that fits them all fits the one it lands in)."""
    named = str(opts.options.get("partition") or opts.partition or "")
    if not named:
        return next((p for p in partitions.values() if p.default), None)
    found = [partitions.get(n.strip()) for n in named.split(",")]
    if not found or None in found:
        return None  # unknown to us: sbatch --test-only says so in Slurm's words
    if len(found) == 1:
        return found[0]

    def lowest(values: list[str | None]) -> str | None:
        finite = [v for v in values if v is not None and minutes(v) is not None]
        return min(finite, key=lambda v: minutes(v) or 0) if finite else None

    return Partition(named, False, lowest([p.default_time for p in found]) if all(p.default_time for p in found)
                     else None, lowest([p.max_time for p in found]))


def _over(asked: str, limit: str | None) -> bool:
    if limit is None:
        return False
    try:
        want = minutes(asked)
    except ValueError:
        return False  # not a time at all: sbatch --test-only refuses it in Slurm's words
    return want is None or want > (minutes(limit) or 0)


def settle_time(opts: SlurmOptions, given_as: str = "--slurm-time",
                partitions: dict[str, Partition] | None = None) -> SlurmOptions:
    """The options with their time limit settled and `time_from` saying whose it is. A time the user
    gave (`given_as` says how: "--slurm-time", a config file's `time`) over the partition's MaxTime is a
    SlurmOptionError naming the limit."""
    asked, what = opts.time, f"{given_as} {opts.time}"
    if "time" in opts.options:  # a pass-through option wins over the rest in sbatch's script
        asked, given_as = str(opts.options["time"]), "--slurm-option time"
        what = f"{given_as}={asked}"
    part = _wanted(opts, read_partitions() if partitions is None else partitions)
    if asked is not None:
        if part is not None and _over(asked, part.max_time):
            raise SlurmOptionError(f"{what} is over partition {part.name}'s MaxTime of {part.max_time}: "
                                   "ask for that or less, or another partition")
        return replace(opts, time=asked, time_from=given_as)
    if part is None:
        return replace(opts, time=DEFAULT_TIME, time_from="perfconsole's default")
    if part.default_time is not None:
        return replace(opts, time=part.default_time, time_from=f"partition {part.name}'s DefaultTime")
    if part.max_time is not None and (minutes(part.max_time) or 0) < (minutes(DEFAULT_TIME) or 0):
        return replace(opts, time=part.max_time, time_from=f"partition {part.name}'s MaxTime")
    return replace(opts, time=DEFAULT_TIME, time_from="perfconsole's default")


def time_line(opts: SlurmOptions) -> str:
    """The progress line that says what limit each job asks for, and whose it is."""
    shown = f"{opts.time} min" if opts.time and opts.time.isdigit() else opts.time
    return f"slurm: time limit {shown} per job, {opts.time_from} (--slurm-time sets another)"

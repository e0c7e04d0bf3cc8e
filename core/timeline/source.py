"""Where a timeline comes from: a torch profiler trace or an nsys SQLite export given as is, or a run snapshot's trace
files (one a rank for a data-parallel job; an nsys run's SQLite exports, which `nsys stats` leaves beside each
.nsys-rep). Sources without timestamps (nsys stats tables, an nvprof summary log, ncu's pages) are said to be so in
one line: their tables are sums per kernel, with no time at which any kernel ran.

A record keeps its trace as `profile.files` (the torch profiler's `torch_trace.json`), and a data-parallel job each
rank's as `overlap[i]["trace"]` (core.measure.job). A snapshot copied to another machine with the folder beside it
that --save made (`prof/` for `prof.json`, ranks in `prof/rank-N/`) finds its traces there.
"""
from __future__ import annotations

from pathlib import Path

from perfconsole.core.record import RunRecord
from perfconsole.core.timeline.model import TimelineError

TRACE_NAMES = ("torch_trace.json", "torch_trace.json.gz")
NO_TIMES = ("has no timestamps (its tables sum each kernel's time; the timeline needs when each ran): "
            "profile the run with --profile torch")
EXPORT = "nsys export --type sqlite -o {sqlite} {rep}"


def is_trace_file(path: Path) -> bool:
    """A torch profiler trace by its name (.json.gz, torch_trace.json) or its first bytes, or an nsys SQLite export."""
    from perfconsole.core.profiling.torch_trace import looks_like_torch_trace
    from perfconsole.core.profiling.nsys_sqlite import looks_like_nsys_sqlite

    if path.name.endswith(".json.gz") or path.name in TRACE_NAMES:
        return True
    if path.suffix.lower() == ".sqlite":
        return looks_like_nsys_sqlite(path)
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            return looks_like_torch_trace(f.read(4096))
    except OSError:
        return False


def record_traces(record: RunRecord, snapshot: Path | None = None) -> list[tuple[int, Path]]:
    """(rank, trace file) of a run, rank 0 first; TimelineError (one line) where it has none on this machine."""
    p = record.profile
    if p is None:
        raise TimelineError(f"{record.name}: no profile (run it with --profile torch for a timeline)")
    per_rank = [(int(o.get("rank", i)), o["trace"]) for i, o in enumerate(record.overlap or []) if o.get("trace")]
    listed = per_rank or [(0, f) for f in p.files if f.endswith((".json", ".json.gz", ".sqlite"))]  # Kineto's JSON
    if not listed and p.profiler == "nsys":
        return _nsys_exports(record, snapshot)
    if not listed:
        if p.profiler == "ncu" or any(f.endswith((".nsys-rep", ".qdrep")) for f in p.files):
            raise TimelineError(f"{record.name}: a profile of {p.profiler} {NO_TIMES}")
        if p.profiler == "torch":
            raise TimelineError(f"{record.name}: its torch profile lists no trace file (the record keeps its tables "
                                f"only); run it again with --profile torch for a timeline")
        raise TimelineError(f"{record.name}: a profile of {p.profiler} tables {NO_TIMES}")
    out, missing = [], []
    for rank, name in sorted(listed):
        found = _find(Path(name), rank, len(listed) > 1, snapshot)
        if found is None:
            missing.append(name)
        else:
            out.append((rank, found))
    if missing:
        raise TimelineError(f"{record.name}: the trace file {missing[0]} is not on this machine"
                            + (f" (nor beside {snapshot})" if snapshot else ""))
    return out


def _nsys_exports(record: RunRecord, snapshot: Path | None) -> list[tuple[int, Path]]:
    """An nsys run's captures as SQLite (`nsys stats` leaves NAME.sqlite beside NAME.nsys-rep; one a rank for a job);
    TimelineError naming the export command where one is not on this machine."""
    reps = [f for f in record.profile.files if f.endswith((".nsys-rep", ".qdrep"))]  # type: ignore[union-attr]
    if not reps:
        raise TimelineError(f"{record.name}: its nsys profile lists no capture file (the record keeps its tables only)")
    out = []
    for rank, rep in enumerate(reps):
        sqlite = Path(rep).with_suffix(".sqlite")
        found = _find(sqlite, rank, len(reps) > 1, snapshot)
        if found is None:
            raise TimelineError(f"{record.name}: no SQLite export of {Path(rep).name} on this machine; make it with "
                                + EXPORT.format(sqlite=sqlite, rep=rep))
        out.append((rank, found))
    return out


def _find(path: Path, rank: int, job: bool, snapshot: Path | None) -> Path | None:
    candidates = [path]
    if snapshot is not None:
        folder = snapshot.parent / snapshot.name.removesuffix(".json")
        candidates += [snapshot.parent / path, folder / (f"rank-{rank}" if job else "") / path.name]
    return next((c for c in candidates if c.is_file()), None)


def untimed_reason(path: Path) -> str:
    """Why a file or folder that is no trace and no snapshot cannot give a timeline (one line)."""
    from perfconsole.core.profiling.ncu_csv import looks_like_ncu
    from perfconsole.core.profiling.nvprof import looks_like_nvprof

    if path.suffix.lower() in (".nsys-rep", ".qdrep"):
        return (f"{path}: an nsys capture is read from its SQLite export: "
                + EXPORT.format(sqlite=path.with_suffix(".sqlite"), rep=path))
    if path.suffix.lower() == ".sqlite":
        return f"{path}: not an Nsight Systems SQLite export (nsys export --type sqlite)"
    if path.is_dir():
        return f"{path}: a folder, not a trace, an nsys SQLite export or a run snapshot"
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            head = f.read(64 * 1024)
    except OSError as exc:
        return f"{path}: cannot read ({exc.strerror or exc})"
    if looks_like_nvprof(head):
        return f"{path}: an nvprof summary log {NO_TIMES}"
    if looks_like_ncu(head):
        return f"{path}: Nsight Compute's pages {NO_TIMES}"
    if path.suffix.lower() in (".csv", ".txt", ".log") and ("Time (%)" in head or "Total Time (ns)" in head):
        return f"{path}: an nsys stats table {NO_TIMES}"
    return f"{path}: not a torch profiler trace, an nsys SQLite export or a run snapshot"

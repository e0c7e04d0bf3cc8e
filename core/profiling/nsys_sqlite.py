"""An Nsight Systems capture's SQLite export (`nsys export --type sqlite`) read with the standard library's sqlite3
into the torch profiler trace's events, so one reader makes the kernel tables of both (core.profiling.torch_trace:
`perfconsole import X.sqlite`) and one loader the timeline's lanes (core.timeline.load).

What is read (the export's own tables; each one optional, its columns looked up, not assumed):
- CUPTI_ACTIVITY_KIND_KERNEL: each kernel's start and end (ns), device, stream, grid and block, correlation id and
  name (`demangledName`, else `shortName`, ids into StringIds) -> `kernel` events;
- CUPTI_ACTIVITY_KIND_MEMCPY and _MEMSET: copies (named by their direction, `copyKind`) and memsets, with bytes;
- NVTX_EVENTS, push/pop and start/end ranges (event types 59 and 60; marks have no end and are left out): the text
  is `text` or StringIds' `textId` -> `user_annotation` ranges on their thread (perfconsole's worker opens one per
  phase, `forward` included, which marks the steps);
- CUPTI_ACTIVITY_KIND_RUNTIME: the host's CUDA runtime calls (`nameId`), paired with their kernels by correlation
  id -> `cuda_runtime` launches.
Times become microseconds from the capture's own clock (torch's unit); a thread is the export's `globalTid`, whose
low 24 bits are the thread id and the next 24 the process id (Nsight Systems' export documentation). The export's
times count from its session's start, which TARGET_INFO_SESSION_START_TIME gives (`utcEpochNs`): the document
carries it as `baseTimeNanoseconds`, Kineto's name for the epoch of its times, so the captures of a job's ranks,
each its own session started at its own time, can be put on one clock (core.timeline.load).
"""
from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from collections.abc import Callable
from typing import Any

from perfconsole.core.profiling.errors import ProfileError

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
NVTX = "NVTX_EVENTS"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
RANGE_TYPES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange (ENUM_NSYS_EVENT_TYPE)
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}
HEADER = b"SQLite format 3\x00"


def looks_like_nsys_sqlite(path: Path) -> bool:
    """A SQLite file that holds an Nsight Systems export (its StringIds table and its session's start time)."""
    try:
        with Path(path).open("rb") as f:
            if f.read(16) != HEADER:
                return False
        tables = _tables(path)
    except (OSError, sqlite3.Error):
        return False
    return "StringIds" in tables and "TARGET_INFO_SESSION_START_TIME" in tables


def trace_document(path: Path) -> dict[str, Any]:
    """The capture as a torch-trace-shaped document ({"traceEvents": [...]}); ProfileError (one line) where the file
    is no readable nsys export or holds nothing timed."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"{path}: no such file or directory")
    if not looks_like_nsys_sqlite(path):
        raise ProfileError(f"{path}: not an Nsight Systems SQLite export (nsys export --type sqlite)")
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            events = _read(db)
            base = _session_start(db)
    except sqlite3.Error as exc:
        raise ProfileError(f"{path}: cannot read the export ({exc})") from None
    if not events:
        raise ProfileError(f"{path}: an Nsight Systems export with no kernels, copies, NVTX ranges or CUDA calls "
                            "in it (was the capture's CUDA tracing on: nsys profile -t cuda,nvtx?)")
    doc: dict[str, Any] = {"traceEvents": events, "source": "nsys sqlite"}
    if base is not None:
        doc["baseTimeNanoseconds"] = base
    return doc


def _session_start(db: sqlite3.Connection) -> int | None:
    """The session's start (ns since the epoch), time 0 of the export's times; None where the export lacks it."""
    if "utcEpochNs" not in _columns(db, "TARGET_INFO_SESSION_START_TIME"):
        return None
    row = db.execute("select utcEpochNs from TARGET_INFO_SESSION_START_TIME").fetchone()
    return row[0] if row and isinstance(row[0], int) else None


def _tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return {r[0] for r in db.execute("select name from sqlite_master where type in ('table', 'view')")}


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"pragma table_info({table})")}  # noqa: S608 - a name of this module's


def _read(db: sqlite3.Connection) -> list[dict[str, Any]]:
    tables = {r[0] for r in db.execute("select name from sqlite_master where type in ('table', 'view')")}
    strings = dict(db.execute("select id, value from StringIds")) if "StringIds" in tables else {}
    events: list[dict[str, Any]] = []
    if KERNELS in tables:
        events += _kernels(db, strings)
    if MEMCPY in tables:
        events += _memory(db, MEMCPY, "gpu_memcpy", lambda r: f"Memcpy {COPY_KINDS.get(r.get('copyKind'), '?')}")
    if MEMSET in tables:
        events += _memory(db, MEMSET, "gpu_memset", lambda _r: "Memset")
    if NVTX in tables:
        events += _ranges(db, strings)
    if RUNTIME in tables:
        events += _launches(db, strings)
    return events


def _span(start: int, end: int) -> tuple[float, float]:
    return start / 1000.0, max(0, end - start) / 1000.0


def _rows(db: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute(sql)]
    finally:
        db.row_factory = None


def _device_event(cat: str, name: str, r: dict[str, Any], **extra: Any) -> dict[str, Any]:
    ts, dur = _span(r["start"], r["end"])
    args = {"device": r.get("deviceId"), "stream": r.get("streamId"), "correlation": r.get("correlationId"), **extra}
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": r.get("deviceId"),
            "tid": r.get("streamId"), "args": args}


def _kernels(db: sqlite3.Connection, strings: dict[int, str]) -> list[dict[str, Any]]:
    cols = _columns(db, KERNELS)
    want = [c for c in ("start", "end", "deviceId", "streamId", "correlationId", "demangledName", "shortName",
                        "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ") if c in cols]
    out = []
    for r in _rows(db, f"select {', '.join(want)} from {KERNELS} where end >= start"):
        name = strings.get(r.get("demangledName")) or strings.get(r.get("shortName")) or "?"
        grid = {"grid": [r["gridX"], r["gridY"], r["gridZ"]], "block": [r["blockX"], r["blockY"], r["blockZ"]]} \
            if "gridX" in r and "blockX" in r else {}
        out.append(_device_event("kernel", name, r, **grid))
    return out


def _memory(db: sqlite3.Connection, table: str, cat: str, name_of: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    cols = _columns(db, table)
    want = [c for c in ("start", "end", "deviceId", "streamId", "correlationId", "bytes", "copyKind") if c in cols]
    return [_device_event(cat, name_of(r), r, bytes=r.get("bytes"))
            for r in _rows(db, f"select {', '.join(want)} from {table} where end >= start")]


def _thread(global_tid: int | None) -> tuple[int, int]:
    g = int(global_tid or 0)
    return (g >> 24) & 0xFFFFFF, g & 0xFFFFFF


def _ranges(db: sqlite3.Connection, strings: dict[int, str]) -> list[dict[str, Any]]:
    cols = _columns(db, NVTX)
    text = "text" if "text" in cols else "NULL"
    text_id = "textId" if "textId" in cols else "NULL"
    types = ", ".join(str(t) for t in RANGE_TYPES)
    out = []
    for r in _rows(db, f"select start, end, {text} as text, {text_id} as textId, globalTid from {NVTX} "
                       f"where eventType in ({types}) and end is not null and end >= start"):
        ts, dur = _span(r["start"], r["end"])
        pid, tid = _thread(r["globalTid"])
        name = r["text"] if r["text"] is not None else strings.get(r["textId"], "")
        out.append({"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid})
    return out


def _launches(db: sqlite3.Connection, strings: dict[int, str]) -> list[dict[str, Any]]:
    out = []
    for r in _rows(db, f"select start, end, globalTid, correlationId, nameId from {RUNTIME} where end >= start"):
        ts, dur = _span(r["start"], r["end"])
        pid, tid = _thread(r["globalTid"])
        out.append({"ph": "X", "cat": "cuda_runtime", "name": strings.get(r["nameId"], "?"), "ts": ts, "dur": dur,
                    "pid": pid, "tid": tid, "args": {"correlation": r["correlationId"]}})
    return out

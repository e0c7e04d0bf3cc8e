"""Snapshots: JSON files with a schema version and a kind, written atomically.

A snapshot is `{"schema": 1, "kind": <kind>, "data": {...}}`. Each kind is a class with `to_dict`
and `from_dict`; `KINDS` names where each lives, and a kind's module is imported only when a snapshot
of that kind is read (so the shared vocabulary here never imports the grids or reports packages).
Nothing here unpickles: snapshots are plain JSON, safe to open from anyone. `load` reads a file or,
given "-", standard input; every input it cannot read is a SnapshotError naming its source.
"""
from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Protocol

from perfconsole.core.paths import NO_SUCH_FILE, PathError, output_file

SCHEMA_VERSION = 1


class Snapshot(Protocol):
    kind: str

    def to_dict(self) -> dict[str, Any]: ...


class SnapshotError(ValueError):
    pass


# kind -> "module:Class". Adding a snapshot kind means adding a line here.
KINDS: dict[str, str] = {
    "run": "perfconsole.core.record:RunRecord",
    "sweep": "perfconsole.core.grids.sweep:SweepRecord",
    "attention": "perfconsole.core.grids.attention:AttentionRecord",
    "comparison": "perfconsole.core.reports.compare:Comparison",
    "ladder": "perfconsole.core.grids.ladder:LadderRecord",
    "scale": "perfconsole.core.grids.scale:ScaleRecord",
    "gate": "perfconsole.core.gate.record:GateRecord",
}


def kind_class(kind: str) -> Any:
    import importlib

    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def dumps(obj: Snapshot) -> str:
    """The snapshot text: what `save` writes and what `run`, `sweep` and `attention` print with --json."""
    return json.dumps({"schema": SCHEMA_VERSION, "kind": obj.kind, "data": obj.to_dict()},
                      indent=1, allow_nan=False, default=_default) + "\n"


def _default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"cannot save {type(o).__name__}")


def _umask() -> int:
    """The process's umask, read without changing it (os.umask sets it, racing other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _mode_for(path: Path) -> int:
    """The mode the file at `path` keeps when it is replaced, or a new file's mode under the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), _mode_for(path))  # mkstemp makes 0600; a saved file gets a plain file's mode
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileExists(SnapshotError):
    """The file to write is there already: replaced only when the user asks (--force, y in the dialog)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: exists")
        self.path = path


def writable_file(path: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """Check, before any work, that a snapshot or report can be written at `path`, by the one rule the CLI
    and the console share: the directory exists (a missing one is an error naming it; nothing is created)
    and takes a new file (a probe file is made there and removed: permission bits alone do not say, for
    root or in /proc), `path` is not a directory or a device, and an existing file is replaced only with
    `overwrite` (FileExists otherwise). SnapshotError if not."""
    try:
        p = output_file(path)
    except PathError as exc:
        raise SnapshotError(str(exc)) from exc
    if p.exists() and not p.is_file():
        raise SnapshotError(f"{p}: not a regular file")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise SnapshotError(f"{p}: cannot create a file in {p.parent} ({exc.strerror or exc})") from exc
    os.close(fd)
    os.unlink(probe)
    if p.exists() and not overwrite:
        raise FileExists(p)
    return p


def save(obj: Snapshot, path: str | os.PathLike[str]) -> Path:
    try:
        p = output_file(path)
    except PathError as exc:
        raise SnapshotError(str(exc)) from exc
    write_atomic(p, dumps(obj))
    return p


def loads(text: str, source: str = "<string>") -> Any:
    """The object a snapshot holds. Also reads the document `perfconsole run --json` printed before it
    printed snapshots (what `export --format json` still writes for a run); every other shape is a
    SnapshotError naming `source`."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{source}: not a perfconsole snapshot (bad JSON at line {exc.lineno})") from exc
    except RecursionError:
        raise SnapshotError(f"{source}: not a perfconsole snapshot (JSON nested too deeply)") from None
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise SnapshotError(f"{source}: not a perfconsole snapshot ({exc})") from exc
    if isinstance(doc, dict) and "data" not in doc:
        if _is_run_document(doc):
            doc = {"schema": SCHEMA_VERSION, "kind": "run", "data": _run_data(doc, source)}
        elif doc.get("kind") in KINDS:
            raise SnapshotError(f"{source}: a {doc['kind']} JSON report (`export --format json`), not a snapshot; "
                                f"give the file --save wrote or what --json printed")
    if not isinstance(doc, dict) or "kind" not in doc or "data" not in doc:
        raise SnapshotError(f"{source}: not a perfconsole snapshot (no kind/data)")
    if doc.get("schema") != SCHEMA_VERSION:
        raise SnapshotError(f"{source}: snapshot schema {doc.get('schema')!r}, this perfconsole reads {SCHEMA_VERSION}")
    if doc["kind"] not in KINDS:
        raise SnapshotError(f"{source}: unknown snapshot kind {doc['kind']!r}; known: {', '.join(sorted(KINDS))}")
    cls = kind_class(doc["kind"])
    try:
        return cls.from_dict(doc["data"])
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise SnapshotError(f"{source}: damaged {doc['kind']} snapshot ({type(exc).__name__}: {exc})") from exc


RUN_DOCUMENT_KEYS = {"status", "spec", "warmup_steps", "steps", "summary"}


def _is_run_document(doc: dict[str, Any]) -> bool:
    return RUN_DOCUMENT_KEYS <= doc.keys() and "kind" not in doc


def _run_data(doc: dict[str, Any], source: str) -> dict[str, Any]:
    """A run document (reports.run.run_document) as a run snapshot's data. Its fields are the
    snapshot's, but steps carry no warm-up flag, `status` is ok|oom|error (`run_status` is the
    record's own) and the profile lists its reports without their tables."""
    def steps(key: str, warmup: bool) -> list[Any]:
        rows = doc.get(key) or []
        return [{**s, "warmup": warmup} if isinstance(s, dict) else s for s in rows]

    profile = doc.get("profile")
    if isinstance(profile, dict) and "tables" not in profile:
        reports = ", ".join(profile.get("reports") or []) or "none"
        note = (f"{source}: a run --json document lists the profile reports ({reports}) without their "
                f"tables; the run's snapshot (--save) has them")
        profile = {"profiler": profile.get("profiler", "?"), "files": profile.get("files") or [], "tables": {},
                   "warnings": [*(profile.get("warnings") or []), note]}
    status = doc.get("run_status") or {"ok": "ok", "oom": "oom"}.get(doc["status"], "error")
    return {"id": doc.get("id") or uuid.uuid4().hex[:12], "name": doc.get("name", ""),
            "created": doc.get("created", ""), "status": status, "spec": doc["spec"] or {},
            "environment": doc.get("environment") or {}, "warmup_steps": steps("warmup_steps", True),
            "steps": steps("steps", False), "summary": doc["summary"], "memory": doc.get("memory"),
            "profile": profile, "error": doc.get("error")}


STDIN = "-"


def load(path: str | os.PathLike[str], stdin: bool = True) -> Any:
    """The snapshot in the file at `path`, or on standard input when `path` is "-" (and `stdin`)."""
    if stdin and str(path) == STDIN:
        return loads(decode_text(read_stdin(), "<stdin>"), "<stdin>")
    p = Path(path).expanduser()
    if p.is_dir():
        raise SnapshotError(f"{p}: is a directory, not a snapshot file")
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise SnapshotError(f"{p}: {NO_SUCH_FILE}") from None
    except OSError as exc:
        raise SnapshotError(f"{p}: {exc.strerror or exc}") from exc
    return loads(decode_text(data, str(p)), str(p))


def read_stdin() -> bytes:
    """All of standard input; a SnapshotError when it is a terminal (nothing was piped in)."""
    if sys.stdin is None or sys.stdin.isatty():
        raise SnapshotError("-: standard input is a terminal; pipe a document in, or give a file")
    return sys.stdin.buffer.read()


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text, or a SnapshotError naming `source` and the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{source}: not a perfconsole snapshot (not UTF-8: byte 0x{data[exc.start]:02x} "
                            f"at offset {exc.start})") from None

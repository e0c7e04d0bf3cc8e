"""Snapshots: JSON files with a schema version and a kind, written atomically.

A snapshot is `{"schema": 1, "kind": <kind>, "data": {...}}`. Each kind is a class with `to_dict`
and `from_dict`; `KINDS` names where each lives, and a kind's module is imported only when a snapshot
of that kind is read (so the shared vocabulary here never imports the grids or reports packages).
Nothing here unpickles: snapshots are plain JSON, safe to open from anyone.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

from perfconsole.core.paths import PathError, output_file

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
}


def kind_class(kind: str) -> Any:
    import importlib

    module, _, name = KINDS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


def dumps(obj: Snapshot) -> str:
    return json.dumps({"schema": SCHEMA_VERSION, "kind": obj.kind, "data": obj.to_dict()},
                      indent=1, allow_nan=False, default=_default)


def _default(o: Any) -> Any:
    if hasattr(o, "to_dict"):
        return o.to_dict()
    raise TypeError(f"cannot save {type(o).__name__}")


def write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside `path`, fsync, then rename over it: never a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(obj: Snapshot, path: str | os.PathLike[str]) -> Path:
    try:
        p = output_file(path)
    except PathError as exc:
        raise SnapshotError(str(exc)) from exc
    write_atomic(p, dumps(obj))
    return p


def loads(text: str, source: str = "<string>") -> Any:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{source}: not a perfconsole snapshot (bad JSON at line {exc.lineno})") from exc
    if not isinstance(doc, dict) or "kind" not in doc or "data" not in doc:
        raise SnapshotError(f"{source}: not a perfconsole snapshot (no kind/data)")
    if doc.get("schema") != SCHEMA_VERSION:
        raise SnapshotError(f"{source}: snapshot schema {doc.get('schema')!r}, this perfconsole reads {SCHEMA_VERSION}")
    if doc["kind"] not in KINDS:
        raise SnapshotError(f"{source}: unknown snapshot kind {doc['kind']!r}; known: {', '.join(sorted(KINDS))}")
    cls = kind_class(doc["kind"])
    try:
        return cls.from_dict(doc["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"{source}: damaged {doc['kind']} snapshot ({type(exc).__name__}: {exc})") from exc


def load(path: str | os.PathLike[str]) -> Any:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SnapshotError(f"{p}: {exc.strerror or exc}") from exc
    return loads(text, str(p))

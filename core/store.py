"""Snapshots: JSON files with a schema version and a kind, written atomically.

A snapshot is `{"schema": 1, "kind": <kind>, "data": {...}}`. Kinds register a class with `to_dict`
and `from_dict` (runs here; sweeps, attention grids and comparisons in their own modules). Nothing
here unpickles: snapshots are plain JSON, safe to open from anyone.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

from perfconsole.core.paths import PathError, output_file
from perfconsole.core.record import RunRecord

SCHEMA_VERSION = 1


class Snapshot(Protocol):
    kind: str

    def to_dict(self) -> dict[str, Any]: ...


class SnapshotError(ValueError):
    pass


_KINDS: dict[str, Any] = {"run": RunRecord}


def register_kind(kind: str, cls: Any) -> None:
    _KINDS[kind] = cls


def _ensure_kinds() -> None:
    # The other kinds live in modules that register themselves on import.
    import importlib

    for mod in ("perfconsole.core.sweep", "perfconsole.core.attention", "perfconsole.core.compare"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


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
    _ensure_kinds()
    cls = _KINDS.get(doc["kind"])
    if cls is None:
        raise SnapshotError(f"{source}: unknown snapshot kind {doc['kind']!r}; known: {', '.join(sorted(_KINDS))}")
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

"""Turn any snapshot (run, sweep, attention grid, comparison) into Markdown, CSV or JSON text."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from perfconsole.core import report_run

FORMATS = ("md", "csv", "json")

_EXPORTERS: dict[tuple[str, str], Callable[[Any], str]] = {
    ("run", "md"): report_run.markdown,
    ("run", "csv"): report_run.csv_text,
    ("run", "json"): lambda r: json.dumps(report_run.run_document(r), indent=2) + "\n",
}


def register_exporter(kind: str, fmt: str, fn: Callable[[Any], str]) -> None:
    _EXPORTERS[(kind, fmt)] = fn


def export(obj: Any, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format: must be one of {', '.join(FORMATS)}, not {fmt!r}")
    fn = _EXPORTERS.get((obj.kind, fmt))
    if fn is None:
        raise ValueError(f"format: {obj.kind} snapshots export as "
                         f"{', '.join(f for k, f in _EXPORTERS if k == obj.kind)}")
    return fn(obj)

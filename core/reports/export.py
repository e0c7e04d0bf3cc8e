"""Turn any snapshot (run, sweep, attention grid, comparison, ladder, scaling curve, gate) into Markdown, CSV or JSON text, a
run into a Chrome trace-event document (`trace`, for ui.perfetto.dev and chrome://tracing), and a profiled run into an
SVG of its timeline (`svg`: the drawing `perfconsole timeline` prints, read from the run's trace file).

The two tables below are the one place that say which kind exports how; the report modules only format.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perfconsole.core.reports import attention as report_attention
from perfconsole.core.reports import compare as report_compare
from perfconsole.core.reports import gate as report_gate
from perfconsole.core.reports import ladder as report_ladder
from perfconsole.core.reports import run as report_run
from perfconsole.core.reports import scale as report_scale
from perfconsole.core.reports import sweep as report_sweep
from perfconsole.core.reports import trace as report_trace

FORMATS = ("md", "csv", "json", "trace", "svg")

_EXPORTERS: dict[tuple[str, str], Callable[[Any], str]] = {
    ("run", "md"): report_run.markdown,
    ("run", "csv"): report_run.csv_text,
    ("run", "json"): lambda r: json.dumps(report_run.run_document(r), indent=2) + "\n",
    ("run", "trace"): report_trace.trace_text,
    ("sweep", "md"): report_sweep.markdown,
    ("sweep", "csv"): report_sweep.csv_text,
    ("sweep", "json"): report_sweep.json_text,
    ("attention", "md"): report_attention.markdown,
    ("attention", "csv"): report_attention.csv_text,
    ("attention", "json"): report_attention.json_text,
    ("comparison", "md"): report_compare.markdown,
    ("comparison", "csv"): report_compare.csv_text,
    ("comparison", "json"): lambda c: json.dumps(report_compare.document(c), indent=2) + "\n",
    ("ladder", "md"): report_ladder.markdown,
    ("ladder", "csv"): report_ladder.csv_text,
    ("ladder", "json"): report_ladder.json_text,
    ("scale", "md"): report_scale.markdown,
    ("scale", "csv"): report_scale.csv_text,
    ("scale", "json"): report_scale.json_text,
    ("gate", "md"): report_gate.markdown,
    ("gate", "json"): lambda g: json.dumps(g.to_dict(), indent=2) + "\n",
}


def _timeline_svg(record: Any, snapshot: Path | None) -> str:
    """The run's timeline as an SVG; ValueError (one line) where the run has no trace on this machine."""
    from perfconsole.core.timeline.drawing import record_svg   # numpy and the trace reader: only when asked
    from perfconsole.core.timeline.model import TimelineError

    try:
        return record_svg(record, snapshot)
    except TimelineError as exc:
        raise ValueError(f"format svg draws the run's timeline: {exc}") from None


# These read files beside the snapshot (the run's trace), so they are given the snapshot's path too.
_FROM_FILES: dict[tuple[str, str], Callable[[Any, Path | None], str]] = {
    ("run", "svg"): _timeline_svg,
}


def export(obj: Any, fmt: str, snapshot: Path | None = None) -> str:
    """`obj` as `fmt`; `snapshot`, the file it was read from (None: standard input), is where a run's trace is
    looked for beside it."""
    if fmt not in FORMATS:
        raise ValueError(f"format: must be one of {', '.join(FORMATS)}, not {fmt!r}")
    from_files = _FROM_FILES.get((obj.kind, fmt))
    if from_files is not None:
        return from_files(obj, snapshot)
    fn = _EXPORTERS.get((obj.kind, fmt))
    if fn is None:
        raise ValueError(f"format: {obj.kind} snapshots export as "
                         f"{', '.join(f for k, f in [*_EXPORTERS, *_FROM_FILES] if k == obj.kind)}, not {fmt!r}")
    return fn(obj)

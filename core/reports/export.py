"""Turn any snapshot (run, sweep, attention grid, comparison, ladder, scaling curve, gate) into Markdown, CSV or JSON text, and a
run into a Chrome trace-event document (`trace`, for ui.perfetto.dev and chrome://tracing).

The table below is the one place that says which kind exports how; the report modules only format.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from perfconsole.core.reports import attention as report_attention
from perfconsole.core.reports import compare as report_compare
from perfconsole.core.reports import gate as report_gate
from perfconsole.core.reports import ladder as report_ladder
from perfconsole.core.reports import run as report_run
from perfconsole.core.reports import scale as report_scale
from perfconsole.core.reports import sweep as report_sweep
from perfconsole.core.reports import trace as report_trace

FORMATS = ("md", "csv", "json", "trace")

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


def export(obj: Any, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format: must be one of {', '.join(FORMATS)}, not {fmt!r}")
    fn = _EXPORTERS.get((obj.kind, fmt))
    if fn is None:
        raise ValueError(f"format: {obj.kind} snapshots export as "
                         f"{', '.join(f for k, f in _EXPORTERS if k == obj.kind)}, not {fmt!r}")
    return fn(obj)

"""A scaling curve (core.grids.scale) in the Grids pane: its table, one row per process count, then the notes
and a bar per count (compute and the communication the step waited for), the figures the CLI and the Markdown
export show (core.reports.scale)."""
from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from perfconsole.core.reports import scale as report
from perfconsole.tui.glyphs import Glyphs


def scale_table(scale: Any, glyphs: Glyphs, status_word: Any = None) -> tuple[Table, list[Text]]:
    """(the table, the lines under it). `status_word(status)` says a count that has not run as the grid does
    (pending while the curve runs, not run once it stopped)."""
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1), expand=False)
    for name in report.headers(scale):
        t.add_column(name, justify="left" if name == "status" else "right", no_wrap=True)
    for row in report.rows(scale):
        ok = row.status == "ok"
        word = status_word(row.status) if status_word and row.status == "pending" else report.status_text(row)
        t.add_row(report.count_text(row), str(row.per_rank_batch), Text(word, style="green" if ok else "yellow"),
                  *report.cells(row))
    lines = [Text(line, style="dim") for line in report.notes(scale)]
    bars = report.bar_lines(scale, full=glyphs.full, comm=glyphs.warmup)
    if bars:
        lines += [Text(""), Text(report.efficiency_label(scale), style="bold"), *(Text(line) for line in bars)]
    return t, lines

"""Parse what `nsys stats` writes: CSV files, and console logs holding CSV or column tables.

A console log interleaves status lines (NOTICE, Processing/Running, SKIPPED, container banners) with
report tables, in CSV (`--format csv` without `-o`) or in the default column format. The rule from
FORMATS.md §6: drop lines until a known header; a new header, a Processing/Running line, a SKIPPED
line or a blank line ends the current table. A SKIPPED report is absent, not empty.
"""
from __future__ import annotations

import csv
import gc
import re
from dataclasses import dataclass, field

import pandas as pd

from perfconsole.core.profiling.columns import (
    Row, Tables, canonical_report, known_header, make_rows, report_from_header,
)
from perfconsole.core.profiling.csv_frames import read_table
from perfconsole.core.profiling.errors import ProfileFormatError
from perfconsole.core.profiling.gpu_trace import is_trace_header, read_trace
from perfconsole.core.profiling.table import ProfileTable, table_from_rows

_PROCESSING = re.compile(r"^\s*(Processing|Running) \[")
_SCRIPT = re.compile(r"[\\/](\w+)\.py\b")
_TITLE = re.compile(r"^\s*\*\*\s.*\((\w+)(?::[\w-]+)*\):\s*$")
_DASHES = re.compile(r"^\s*-+(\s+-+)+\s*$")
_ELLIPSES = ("\u2026", "...")


@dataclass
class _Table:
    report: str | None
    headers: list[str]
    line: int  # the header's line; row i is on line + 1 + i
    records: list[list[str]] = field(default_factory=list)
    spans: list[tuple[int, int]] | None = None  # column format only


@dataclass
class StatsParse:
    tables: Tables = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def parse_stats_text(text: str, path: str, hint: str | None = None) -> StatsParse:
    """Every report table in `text`; a malformed table becomes a warning naming `path:line`."""
    # Building 100k-row tables allocates only acyclic objects; the cyclic GC passes it would trigger
    # cost a third of the parse time (the 100k-row benchmark), so hold it off for the parse.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse(text, path, hint)
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class CsvStart:
    """Where the first table of a text begins, when it is a CSV table and nothing but status lines
    comes before it: its header line (0-based) and cells, and the report its preamble announced."""
    line: int
    headers: list[str]
    hint: str | None


def first_csv_table(lines: list[str], path: str, hint: str | None) -> CsvStart | None:
    found = _parse(lines, path, hint, first_csv=True)
    return found if isinstance(found, CsvStart) else None


def _parse(text: str | list[str], path: str, hint: str | None, first_csv: bool = False) -> StatsParse | CsvStart:
    out = StatsParse()
    lines = text.splitlines() if isinstance(text, str) else text
    pending: str | None = None  # report announced by the last Processing line or title
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        stripped = line.strip()
        if _PROCESSING.match(line) and not re.match(r"^\s*Processing \d+ events", line):
            m = _SCRIPT.search(line)
            pending = canonical_report(m.group(1)) if m else None
            if "SKIPPED:" in line:  # 2022.x prints the verdict on the same line
                _skip(out, pending, path, i + 1, line)
                pending = None
            i += 1
            continue
        if stripped.startswith("SKIPPED:"):
            _skip(out, pending, path, i + 1, line)
            pending = None
            i += 1
            continue
        title = _TITLE.match(line)
        if title:
            pending = canonical_report(title.group(1)) or pending
            i += 1
            continue
        if i + 1 < n and stripped and _DASHES.match(lines[i + 1]):
            if first_csv:
                return out
            i = _read_column_table(lines, i, path, pending or hint, out)
            pending = None
            continue
        if "," in line and not stripped.startswith(("NOTICE", "WARNING")):
            cells = next(csv.reader([line]))
            if known_header(cells) or is_trace_header(cells):
                if first_csv:
                    return CsvStart(i, cells, pending or hint) if not out.warnings else out
                i = _read_csv_table(lines, i, cells, path, pending or hint, out)
                pending = None
                continue
        i += 1
    return out


def _skip(out: StatsParse, report: str | None, path: str, lineno: int, line: str) -> None:
    reason = line.split("SKIPPED:", 1)[1].strip()
    name = report or "a report"
    out.skipped.append(report or "")
    out.warnings.append(f"{path}:{lineno}: {name} absent (nsys SKIPPED it: {reason})")


def _ends_table(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith("SKIPPED:") or bool(_PROCESSING.match(line))


def _read_csv_table(lines: list[str], start: int, headers: list[str], path: str, hint: str | None,
                    out: StatsParse) -> int:
    # Data rows start with a digit or a quote; only blank or letter/space-led lines can end the table.
    end = next((i for i in range(start + 1, len(lines))
                if (not lines[i] or lines[i][0] in " \tSPR") and _ends_table(lines[i])), len(lines))
    table = _Table(None, headers, start + 1)
    table.report = _which_report(headers, hint, lines[start + 1:min(end, start + 51)])
    if table.report == "cuda_gpu_trace":
        _read_trace(lines[start:end], headers, path, start + 1, out)
        return end
    if table.report is not None and table.report not in out.tables:
        frame = _frame(lines[start:end], headers, table.report)
        if frame is not None:
            out.tables[table.report] = ProfileTable(frame)
            return end
    width = len(headers)
    records = list(csv.reader(lines[start + 1:end]))
    for offset, cells in enumerate(records):
        if len(cells) != width and known_header(cells):  # another report without a Processing line
            table.records = records[:offset]
            _finish(table, path, out)
            return _read_csv_table(lines, start + 1 + offset, cells, path, None, out)
    table.records = records
    _finish(table, path, out)
    return end


def _read_trace(lines: list[str], headers: list[str], path: str, line: int, out: StatsParse) -> None:
    if "cuda_gpu_trace" in out.tables:
        out.warnings.append(f"{path}:{line}: second cuda_gpu_trace table ignored")
        return
    got = read_trace(("\n".join(lines) + "\n").encode("utf-8", "replace"), headers)
    if isinstance(got, str):
        out.warnings.append(f"{path}:{line}: cuda_gpu_trace: cannot read the table ({got}) (report not loaded)")
    else:
        out.tables["cuda_gpu_trace"] = ProfileTable(got)


def _frame(lines: list[str], headers: list[str], report: str) -> pd.DataFrame | None:
    """The table read by the CSV library (csv_frames), or None: then row by row, which names a bad line."""
    try:
        data = ("\n".join(lines) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only the row-wise reader takes it
        return None
    return read_table(data, headers, report, len(lines) - 1)


def _read_column_table(lines: list[str], start: int, path: str, hint: str | None, out: StatsParse) -> int:
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[start + 1])]
    headers = _slice(lines[start], spans)
    table = _Table(None, headers, start + 1, spans=spans)
    end = start + 2
    while end < len(lines) and not _ends_table(lines[end]):
        table.records.append(_slice(lines[end], spans))
        end += 1
    table.report = _which_report(headers, hint, [" ".join(c[-1:]) for c in table.records[:50]])
    if table.report is None and not known_header(headers):
        return end  # a dashed block that is no report table
    _finish(table, path, out)
    return end


def _slice(line: str, spans: list[tuple[int, int]]) -> list[str]:
    # Cut between the ends of the dash runs: numbers are right-aligned to their run's end, and the last
    # (name) column takes the rest of the line, so a value a character off its run still lands whole.
    cuts = [0] + [b for _, b in spans[:-1]]
    cells = [line[a:b].strip().replace(",", "") for a, b in zip(cuts, cuts[1:])]  # 3,481,709 -> 3481709
    cells.append(line[cuts[-1]:].strip())
    return cells


def _which_report(headers: list[str], hint: str | None, sample: list[str]) -> str | None:
    if is_trace_header(headers):
        return "cuda_gpu_trace"
    found = report_from_header(headers, hint)
    if found is None and hint is None and any(h.strip().lower() == "num calls" for h in headers):
        # cuda_api_sum and osrt_sum share a header; CUDA entry points all start with "cu" (FORMATS.md §4).
        names = [s.rsplit(",", 1)[-1].strip() for s in sample if s.strip()]
        cuda = sum(1 for s in names if s.startswith("cu"))
        found = "cuda_api_sum" if names and cuda * 2 >= len(names) else "osrt_sum"
    if found is None:
        return hint
    if hint is not None and hint != found and {hint, found} != {"nvtx_sum", "nvtx_pushpop_sum"}:
        return found  # the header is the stronger evidence (old names carry new columns in 2022.x)
    return hint or found


ends_table = _ends_table
which_report = _which_report


def _finish(table: _Table, path: str, out: StatsParse) -> None:
    if table.report is None:
        out.warnings.append(f"{path}:{table.line}: unrecognised report columns: {','.join(table.headers)}")
        return
    if table.report in out.tables:
        out.warnings.append(f"{path}:{table.line}: second {table.report} table ignored")
        return
    try:
        rows = make_rows(table.report, table.headers, table.records, path, table.line + 1)
    except ProfileFormatError as exc:
        out.warnings.append(f"{exc} (report {table.report} not loaded)")
        return
    if table.spans is not None:
        _flag_truncated(rows)
    out.tables[table.report] = table_from_rows(rows)


def _flag_truncated(rows: list[Row]) -> None:
    """Column tables cut long names to ~100 chars with an ellipsis; say so rather than pass them as whole."""
    for row in rows:
        label = row.get("name") or row.get("operation") or row.get("range") or ""
        row["truncated"] = isinstance(label, str) and label.endswith(_ELLIPSES)

"""`load_profile`: one entry point for every profile input a user can hand over.

Accepted: a directory of `nsys stats` CSVs (report recognised from the file name, doubled suffixes
included, else from the header), one CSV, a captured `nsys stats` console log (CSV or column tables),
an nvprof log, a torch.profiler Chrome trace (`torch_trace.json`), an `.nsys-rep`/`.qdrep` (exported
with nsys where one is found), an nsys capture's SQLite export (core.profiling.nsys_sqlite: no nsys needed), or Nsight Compute's output: its CSV pages, alone or in the directory of an
nsys capture of the same program, or an `.ncu-rep` (read with ncu where one is found; core.profiling.ncu_import).
ncu's pages alone get a kernel summary of their launches' replay durations (core.profiling.ncu_summary).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from perfconsole.core.profiling.columns import Tables, report_from_stem
from perfconsole.core.profiling.errors import NsysError, ProfileError
from perfconsole.core.profiling.gpu_trace import with_summaries
from perfconsole.core.profiling.locate import find_nsys
from perfconsole.core.profiling.ncu_csv import looks_like_ncu
from perfconsole.core.profiling.ncu_import import NCU_SUFFIXES, load_pages, load_report
from perfconsole.core.profiling.ncu_summary import with_replay_summary
from perfconsole.core.profiling.nsys_run import export_stats
from perfconsole.core.profiling import stats_file
from perfconsole.core.profiling.nvprof import looks_like_nvprof, parse_nvprof
from perfconsole.core.profiling.stats_text import parse_stats_text
from perfconsole.core.profiling.torch_trace import looks_like_torch_trace, parse_torch_trace

TEXT_SUFFIXES = (".csv", ".txt", ".log", ".out", ".stdout", ".json")
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def load_profile(path: Path, nsys_explicit: str | None = None) -> tuple[Tables, list[str]]:
    """(tables, warnings naming file and line); ProfileError only when nothing at all loads."""
    path = Path(path)
    if not path.exists():
        raise ProfileError(f"{path}: no such file or directory")
    if path.is_dir():
        tables, warnings, sources = _load_dir(path, nsys_explicit)
    else:
        tables, warnings = _load_file(path, nsys_explicit)
        sources = 1
    if not tables:
        if sources == 1 and warnings:
            raise ProfileError(warnings[0])
        detail = f" ({warnings[0]})" if warnings else ""
        raise ProfileError(f"{path}: no nsys or nvprof tables found{detail}")
    # ncu's pages alone: their launches' replay durations are the kernel times (a capture's summary wins)
    tables, untimed = with_replay_summary(with_summaries(tables))
    return tables, [*warnings, *untimed]


def _load_dir(path: Path, nsys_explicit: str | None) -> tuple[Tables, list[str], int]:
    texts = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES
                   and p.name != "SOURCE.txt")
    reps = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in REPORT_SUFFIXES)
    ncu_pages = [(p, text) for p in texts if (text := _ncu_text(p)) is not None]
    texts = [p for p in texts if p not in {q for q, _ in ncu_pages}]
    tables: Tables = {}
    warnings: list[str] = []
    ncu_reps = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in NCU_SUFFIXES)
    if ncu_pages:  # ncu's pages, or else its report, beside whatever nsys wrote
        tables, warnings = load_pages(ncu_pages)
    elif ncu_reps:
        tables, warnings = load_report(ncu_reps[0])
    ncu = bool(ncu_pages or ncu_reps)
    sources = texts if texts else ([] if ncu and not reps else reps[:1])
    if texts and reps:
        warnings.append(f"{path}: read the CSV/log files; {len(reps)} report file(s) there not exported")
    for file in sources:
        got, warns = _load_file(file, nsys_explicit)
        warnings.extend(warns)
        for report, rows in got.items():
            if report in tables:
                warnings.append(f"{file}: a second {report} table in the directory ignored")
            else:
                tables[report] = rows
    return tables, warnings, len(sources) + ncu


def _ncu_text(path: Path) -> str | None:
    """The file's text where it is one of Nsight Compute's CSV pages (its header line within the first lines)."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            head = f.read(64 * 1024)
        return path.read_text(encoding="utf-8", errors="replace") if looks_like_ncu(head) else None
    except OSError:
        return None


def _load_file(path: Path, nsys_explicit: str | None) -> tuple[Tables, list[str]]:
    if path.suffix.lower() in REPORT_SUFFIXES:
        return _load_report(path, nsys_explicit)
    if path.suffix.lower() in NCU_SUFFIXES:
        return load_report(path)
    if path.suffix.lower() == ".sqlite":
        from perfconsole.core.profiling.nsys_sqlite import trace_document
        from perfconsole.core.profiling.torch_trace import tables_of_events

        return tables_of_events(trace_document(path)["traceEvents"], str(path))
    if path.suffix.lower() == ".gz":  # the torch profiler's compressed trace (trace.json.gz), read as the plain one
        return _load_gzip_trace(path)
    try:
        big = _load_big_csv(path)
        if big is not None:
            return big
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return {}, [f"{path}: cannot read ({exc.strerror})"]
    if not text.strip():
        return {}, [f"{path}:1: empty file"]
    if looks_like_torch_trace(text):
        return parse_torch_trace(text, str(path))
    if looks_like_ncu(text):
        return load_pages([(path, text)])
    if looks_like_nvprof(text):
        tables, warnings = parse_nvprof(text, str(path))
        if tables and not text.endswith("\n"):
            warnings.append(_no_final_newline(path, text))  # nvprof ends its log with a newline too
        return tables, warnings
    parsed = parse_stats_text(text, str(path), report_from_stem(path.stem))
    if parsed.tables and not text.endswith("\n"):
        # nsys ends every file with a newline (FORMATS.md §1): without one the last row may be cut short
        parsed.warnings.append(_no_final_newline(path, text))
    if not parsed.tables and not parsed.warnings:
        parsed.warnings.append(f"{path}:1: no nsys stats table (no known header line)")
    return parsed.tables, parsed.warnings


def _load_gzip_trace(path: Path) -> tuple[Tables, list[str]]:
    import gzip
    import zlib

    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:  # gzip.BadGzipFile is an OSError
        return {}, [f"{path}: cannot read as gzip ({exc.strerror or exc})"]
    except (EOFError, zlib.error) as exc:
        return {}, [f"{path}: a cut or damaged gzip file ({exc})"]
    if not looks_like_torch_trace(text):
        return {}, [f"{path}: a gzip file that holds no torch profiler trace (the only compressed profile read)"]
    return parse_torch_trace(text, str(path))


def _load_big_csv(path: Path) -> tuple[Tables, list[str]] | None:
    """A large stats CSV read from the file a block at a time (stats_file); None for anything else."""
    size = path.stat().st_size
    if size < stats_file.FAST_MIN_BYTES:
        return None
    with path.open("rb") as f:
        head = f.read(stats_file.HEAD).decode("utf-8", errors="replace")
    if not head.strip() or looks_like_torch_trace(head) or looks_like_nvprof(head):
        return None
    read = stats_file.read_stats_file(path, report_from_stem(path.stem), size)
    if read is None:
        return None
    parsed, ends_in_newline, lines = read
    if not ends_in_newline:
        parsed.warnings.append(_no_final_newline(path, lines))
    return parsed.tables, parsed.warnings


def _no_final_newline(path: Path, text: str | int) -> str:
    lines = text if isinstance(text, int) else text.count(chr(10)) + 1
    return f"{path}:{lines}: no newline at end of file; the last row may be truncated"


def _load_report(path: Path, nsys_explicit: str | None) -> tuple[Tables, list[str]]:
    nsys = find_nsys(nsys_explicit)
    if nsys is None:
        raise NsysError(f"{path}: reading a report needs nsys, and none was found; run `nsys stats --format csv "
                        f"-o PREFIX {path.name}` where nsys is installed and import the CSVs")
    out_dir = path.with_name(path.name.removesuffix(path.suffix) + "_stats")
    try:
        out_dir.mkdir(exist_ok=True)
        if not os.access(out_dir, os.W_OK):
            raise PermissionError
    except OSError:
        out_dir = Path(tempfile.mkdtemp(prefix="perfconsole-stats-"))
    tables, _files, warnings = export_stats(nsys, path, out_dir)
    return tables, warnings

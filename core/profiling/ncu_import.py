"""Nsight Compute's output handed to `perfconsole import`: its CSV pages (`--page details`, `--page raw`, one or
both; printed while profiling or by `ncu --import REP --csv`) or a report, `.ncu-rep`, read back through ncu's own
`--import` where ncu is installed. The tables are those of `run --profile ncu` (`ncu_kernels`, `ncu_rules`,
`ncu_run`), so `kernels --why`, the console's kernel detail and the roofline read an import as they read a run.

Beside an nsys capture of the same program (its stats CSVs in the same folder), each ncu kernel is joined to
the nsys kernel summary by name (core.profiling.ncu_kernels.kernel_key: mangled or demangled, templates and
arguments aside), so the why view has the capture's time for it.
"""
from __future__ import annotations

import shlex
import subprocess
import tempfile
from pathlib import Path

from perfconsole.core.profiling.columns import Tables
from perfconsole.core.profiling.errors import ProfileFormatError
from perfconsole.core.profiling.ncu_csv import read_pages
from perfconsole.core.profiling.ncu_kernels import launch_rows, rule_rows
from perfconsole.core.profiling.ncu_report import NCU_ENV, NcuError, export_pages, find_ncu

NCU_SUFFIXES = (".ncu-rep",)
IMPORT_NOTE = ("imported from Nsight Compute's output: ncu replayed each kernel with its caches flushed, so its "
               "durations are not a timed program's")


def ncu_tables(details: str | None, raw: str | None, source: str) -> Tables:
    """The run's ncu tables from one or both pages; ProfileFormatError where a page is not ncu's."""
    pages = read_pages(details, raw, source)
    rows = launch_rows(pages)
    run = {"ncu": None, "kernels_asked": [], "launches_profiled": len(rows), "pages": pages.page,
           "note": IMPORT_NOTE, "source": source}
    return {"ncu_kernels": rows, "ncu_rules": rule_rows(pages), "ncu_run": [run]}


def load_pages(files: list[tuple[Path, str]]) -> tuple[Tables, list[str]]:
    """ncu CSV pages (path, text), at most one of each kind: the details page has Metric Value, the raw one not."""
    details = [(p, t) for p, t in files if '"Metric Value"' in _header(t)]
    raw = [(p, t) for p, t in files if (p, t) not in details]
    warnings = [f"{p}: a second ncu {kind} page ignored" for kind, group in (("details", details), ("raw", raw))
                for p, _ in group[1:]]
    source = ", ".join(str(p) for p, _ in (details[:1] + raw[:1]))
    try:
        return ncu_tables(details[0][1] if details else None, raw[0][1] if raw else None, source), warnings
    except (ProfileFormatError, ValueError, KeyError) as exc:
        return {}, [*warnings, f"{source}: not readable as Nsight Compute's CSV ({exc})"]


def load_report(path: Path, ncu_explicit: str | None = None) -> tuple[Tables, list[str]]:
    """An `.ncu-rep`, through `ncu --import`; without ncu, one line saying how to hand over its pages instead."""
    ncu = ncu_explicit or find_ncu()
    if ncu is None:
        rep = shlex.quote(str(path))
        return {}, [f"{path}: reading an .ncu-rep needs Nsight Compute's ncu, and none was found (${NCU_ENV}, PATH, "
                    f"/opt/nvidia/nsight-compute/*/ncu); on a machine with ncu, `ncu --import {rep} --csv --page "
                    f"details > details.csv` (and --page raw > raw.csv) gives pages this machine can import"]
    with tempfile.TemporaryDirectory(prefix="perfconsole-ncu-") as tmp:
        try:
            details, raw = export_pages(ncu, path, Path(tmp), _run)
            texts = [(details, details.read_text(encoding="utf-8")), (raw, raw.read_text(encoding="utf-8"))]
        except (NcuError, OSError) as exc:
            return {}, [f"{path}: {exc}"]
        tables, warnings = load_pages(texts)
    if tables:
        tables["ncu_run"][0]["source"] = str(path)
    return tables, warnings


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def _header(text: str) -> str:
    return next((ln for ln in text.splitlines()[:50] if ln.startswith('"ID",')), "")

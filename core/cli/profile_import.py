"""`perfconsole import PATH [--json] [--save FILE] [--nsys PATH]`: profiler output as a run record.

nsys stats CSVs or logs, an `.nsys-rep` or its SQLite export, an nvprof log, a torch.profiler trace, Nsight Compute's CSV pages or an
`.ncu-rep` (core.profiling.load). The record holds the profile tables and no timings (status `imported`), so it
opens in the console and exports like any run; ncu's pages alone give kernel times of ncu's replays, and say so.
PATH may also be a profiled run's snapshot (or its older `run --json` document), whose tables are taken; `-`
reads any of these text inputs from standard input.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

from perfconsole.core import store
from perfconsole.core.cli.main import UsageError, add_force_argument, reader_may_be_gone, save_path
from perfconsole.core.profiling.categories import categorize
from perfconsole.core.profiling.columns import Tables
from perfconsole.core.profiling.errors import ProfileError
from perfconsole.core.profiling.torch_trace import looks_like_torch_trace
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.core.profiling.loaded import loaded_of

TOP_ROWS = 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    what = ("read nsys stats CSVs/logs, an .nsys-rep or its SQLite export, an nvprof log, a torch.profiler trace, or "
            "Nsight Compute's CSV pages or .ncu-rep into a run record")
    p = sub.add_parser("import", help=what, description=f"{what[0].upper()}{what[1:]}: its profile tables and no "
                       "timed steps. Nsight Compute's pages alone give each kernel the durations ncu measured "
                       "under its replay, marked as such; `perfconsole kernels RUN.json --why` reads them.")
    p.add_argument("path", help="a directory of CSVs, a CSV, an nsys stats or nvprof log, an .nsys-rep, an nsys "
                                "SQLite export (nsys export --type sqlite), a "
                                "torch.profiler trace (torch_trace.json), ncu's `--csv --page details|raw` output, "
                                "an .ncu-rep (read with ncu where installed), or a profiled run's snapshot; "
                                "- for stdin")
    p.add_argument("--json", action="store_true", help="print {tables, categories, warnings} as JSON")
    p.add_argument("--save", default=None, metavar="FILE", help="save the run record snapshot here")
    add_force_argument(p)
    p.add_argument("--nsys", default=None, metavar="PATH", help="the nsys to export an .nsys-rep with")
    p.set_defaults(func=run)


def build_record(path: Path, tables: Tables, warnings: list[str]) -> RunRecord:
    record = RunRecord(spec=RunSpec(), name=f"import {path.name}", status="imported")
    record.profile = Profile(profiler="import", files=[str(path)], tables=tables, warnings=list(warnings))
    return record


def json_document(tables: Tables, warnings: list[str]) -> dict[str, Any]:
    shares = loaded_of(Profile("import", [], tables)).category_shares()
    return {"tables": tables, "categories": [c.to_dict() for c in shares], "warnings": warnings}


def run(args: argparse.Namespace) -> int:
    save = save_path(args.save, args.force)  # checked before anything is read
    try:
        path, tables, warnings = _read(args.path, args.nsys)
    except (ProfileError, store.SnapshotError) as exc:
        raise UsageError(str(exc)) from None
    if save is not None:
        try:
            saved = store.save(build_record(path, tables, warnings), save)
        except (store.SnapshotError, OSError) as exc:
            raise UsageError(f"{save}: cannot save ({getattr(exc, 'strerror', None) or exc})") from None
        print(f"saved {saved}", file=sys.stderr)
    if args.json:
        try:
            # json.dumps(doc, indent=1) to the byte, a block of rows at a time (core/profiling/table_json.py)
            from perfconsole.core.profiling import table_json  # pandas: only where tables are written

            table_json.dump(json_document(tables, warnings), sys.stdout, indent=1)
            sys.stdout.write("\n")
            sys.stdout.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            sys.stderr.close()
    else:
        _print_tables(build_record(path, tables, warnings).profile, args.path if save is None else str(save))
    return 0


def _read(arg: str, nsys: str | None) -> tuple[Path, Tables, list[str]]:
    """(the path to name the record after, tables, warnings) from a profiler output, a run snapshot,
    or standard input ("-") holding either."""
    from perfconsole.core.profiling.load import load_profile  # pandas: imported by `import`, not by every --help

    if arg == store.STDIN:
        data = store.read_stdin()
        if data.lstrip()[:1] == b"{" and not looks_like_torch_trace(data[:4096].decode("utf-8", "replace")):
            text = store.decode_text(data, "<stdin>")
            return Path("stdin"), *_snapshot_tables(store.loads(text, "<stdin>"), "<stdin>")
        with tempfile.TemporaryDirectory(prefix="perfconsole-stdin-") as tmp:
            file = Path(tmp) / "stdin.txt"  # the profile readers take files; messages name stdin
            file.write_bytes(data)
            try:
                tables, warnings = load_profile(file, nsys)
            except ProfileError as exc:
                raise ProfileError(str(exc).replace(str(file), "<stdin>")) from None
            return Path("stdin"), tables, [w.replace(str(file), "<stdin>") for w in warnings]
    path = Path(arg).expanduser()
    if path.is_file() and _is_snapshot(path):
        return path, *_snapshot_tables(store.load(path, stdin=False), str(path))
    return path, *load_profile(path, nsys)


def _is_snapshot(path: Path) -> bool:
    """A JSON object that is not a torch trace: a perfconsole snapshot or run document."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.lstrip()[:1] == b"{" and not looks_like_torch_trace(head.decode("utf-8", "replace"))


def _snapshot_tables(obj: object, source: str) -> tuple[Tables, list[str]]:
    if not isinstance(obj, RunRecord):
        raise store.SnapshotError(f"{source}: a {getattr(obj, 'kind', '?')} snapshot; import takes a profiled "
                                  f"run's snapshot or profiler output (`perfconsole export` reads this one)")
    if obj.profile is None:
        raise store.SnapshotError(f"{source}: a run with no profile (run it with --profile nsys or torch)")
    if not obj.profile.tables:
        raise store.SnapshotError(f"{source}: the run's profile tables are not in this document (an older "
                                  f"`run --json` or `export --format json`); give the run's snapshot (--save)")
    return obj.profile.tables, list(obj.profile.warnings)


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.3f}"


def _print_tables(profile: Profile, source: str = "RUN.json") -> None:
    """The kernel, category and NVTX tables: fitted to a terminal, tab-separated into a pipe or a file
    (core/cli/tables.py has the rules); ncu's launches as the kernels' replay times, and where the why is."""
    from rich.console import Console
    from rich.text import Text

    from perfconsole.core.cli.tables import CliTable, Column, print_note
    from perfconsole.core.profiling.ncu_summary import REPLAY_NOTE, REPLAY_WORDS

    console = Console()
    loaded, tables, warnings = loaded_of(profile), profile.tables, profile.warnings
    units, replay = loaded.row_units("cuda"), loaded.replay
    with reader_may_be_gone():  # `| head`, `| less` quit early: what was read is no less right
        kernels = tables.get("cuda_gpu_kern_sum")
        if kernels is not None:
            t = CliTable(f"{'GPU kernels' if units == 'kernels' else units}{f', {REPLAY_WORDS}' if replay else ''} "
                         f"(top {min(TOP_ROWS, len(kernels))} of {len(kernels)})",
                         [Column("time (%)"), Column("total (ms)"), Column("count"), Column("avg (us)"),
                          Column("category", "label"), Column("name", "name")])
            for r in kernels[:TOP_ROWS]:
                t.add_row(f"{r.get('time_pct', 0):.1f}", _ms(r["total_time_ns"]), str(r.get("instances", "")),
                          f"{r.get('avg_ns', 0) / 1e3:,.1f}", categorize(r["name"]), r["name"])
            console.print(t)
            shares = CliTable(f"{'Kernel' if units == 'kernels' else 'CPU op'} time by category", [Column("category", "label"), Column("total (ms)"),
                                                          Column("share (%)")])
            for c in loaded.category_shares():
                shares.add_row(c.category, _ms(c.total_ns), f"{100 * c.share:.1f}")
            console.print(shares)
        nvtx = tables.get("nvtx_sum") or tables.get("nvtx_pushpop_sum")
        if nvtx:
            t = CliTable(f"NVTX ranges (top {min(TOP_ROWS, len(nvtx))} of {len(nvtx)})",
                         [Column("time (%)"), Column("total (ms)"), Column("count"), Column("avg (ms)"),
                          Column("domain", "label"), Column("range", "name")])
            for r in nvtx[:TOP_ROWS]:
                t.add_row(f"{r.get('time_pct', 0):.1f}", _ms(r["total_time_ns"]), str(r.get("instances", "")),
                          _ms(r.get("avg_ns", 0)), r["domain"], r["range"])
            console.print(t)
        for phase in loaded.phase_shares():
            line = ", ".join(f"{c.category} {100 * c.share:.1f}%" for c in phase.categories)
            print_note(console, Text.assemble((phase.phase, "bold"), f" ({_ms(phase.total_ns)} ms of {'kernels' if units == 'kernels' else units}): {line}"))
        if replay:
            print_note(console, Text(REPLAY_NOTE))
        others = sorted(set(tables) - {"cuda_gpu_kern_sum", "nvtx_sum", "nvtx_pushpop_sum"})
        if others:
            print_note(console, Text("also loaded: " + ", ".join(f"{k} ({len(tables[k])} rows)" for k in others)))
        if tables.get("ncu_kernels"):
            run = source if source.endswith(".json") else "RUN.json"
            save = "" if run == source else f"perfconsole import {shlex.quote(source)} --save RUN.json, then "
            print_note(console, Text(f"Nsight Compute profiled {len(tables['ncu_kernels'])} launches; why each "
                                     f"kernel takes its time: {save}perfconsole kernels {shlex.quote(run)} --why"))
        for w in warnings:
            print_note(console, Text.assemble(("warning:", "yellow"), f" {w}"))

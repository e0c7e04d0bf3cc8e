"""`perfconsole kernels RUN.json [--why] [--json]`: a saved run's kernels, by time; with `--why`, why each kernel
that Nsight Compute profiled (`run --profile ncu`, or an import of its pages) takes its time
(core.reports.kernel_why): compute % and memory % of peak, achieved TFLOP/s and GB/s against the measured peaks,
the bound, occupancy and ncu's top rule, sorted by what fixing it could save. An import of ncu's pages alone has
no timed steps: its times are ncu's replay durations, and every table says so."""
from __future__ import annotations

import argparse
import json
import math
import shlex
from typing import Any

from perfconsole.core import store
from perfconsole.core.cli.main import UsageError, reader_may_be_gone
from perfconsole.core.record import RunRecord
from perfconsole.core.profiling.loaded import loaded_of

TOP_ROWS = 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("kernels", help="a saved run's kernels by time; --why: Nsight Compute's reasons "
                       "(run --profile ncu, or an import of ncu's pages: its times are ncu's replays)")
    p.add_argument("snapshot", help="a run snapshot (.json) saved or printed (--json) by perfconsole; - for stdin")
    p.add_argument("--why", action="store_true", help="each profiled kernel's limits against the measured peaks, "
                   "its bound and ncu's top rule, sorted by what fixing it could save")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    p.set_defaults(func=run)


def _record(arg: str) -> RunRecord:
    try:
        obj = store.load(arg)
    except store.SnapshotError as exc:
        raise UsageError(str(exc)) from exc
    if not isinstance(obj, RunRecord):
        raise UsageError(f"{arg}: a {obj.kind} snapshot, not a run")
    return obj


def run(args: argparse.Namespace) -> int:
    record = _record(args.snapshot)
    if args.why:
        from perfconsole.core.reports.kernel_why import kernel_why

        why = kernel_why(record)
        if why.missing:
            raise UsageError(why.missing)
        if args.json:
            return _print_json({"run": record.name, "kernel_times": _times(record), "kernels": why.rows,
                            "notes": why.notes})
        from perfconsole.core.reports.kernel_why import peaks_of
        from perfconsole.core.reports.roofline import roofline_lines

        table = why_table(record.name, why.rows, why.notes, why.replay)
        picture = roofline_lines(why.rows, peaks_of(record), ascii_only=True,  # a caption: "# " lines when piped
                                 replay=why.replay)
        table.caption += "\n\n" + ("\n".join(["Roofline (log-log; the run's measured peaks as roofs):", *picture]) if picture
                                   else "no roofline: no profiled kernel has both counted FLOPs and DRAM bytes")
        return _print(table)
    rows = loaded_of(record.profile).rows("cuda_gpu_kern_sum") if record.profile else []
    if not rows and record.profile and record.profile.tables.get("ncu_kernels"):  # an import saved before the times
        pages = " ".join(shlex.quote(f) for f in record.profile.files) or "PAGES"
        raise UsageError(f"{record.name}: saved without its kernels' replay times (an older import of ncu's pages); "
                         f"import them again: perfconsole import {pages} --save {shlex.quote(args.snapshot)} --force")
    if not rows:
        raise UsageError(f"{record.name}: no kernel table (run it with --profile torch, nsys or ncu)")
    rows = sorted(rows, key=lambda r: -(r.get("total_time_ns") or 0))
    if args.json:
        return _print_json({"run": record.name, "kernel_times": _times(record), "kernels": rows})
    return _print(time_table(record, rows))


def _times(record: RunRecord) -> str:
    """What the kernel times are: `ncu replay` (an import of ncu's pages alone) or the run's `profile`."""
    from perfconsole.core.profiling.ncu_summary import REPLAY

    return REPLAY if record.profile and loaded_of(record.profile).replay else "profile"


def _num(v: Any, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def why_table(name: str, rows: list[dict[str, Any]], notes: list[str], replay: bool = False) -> Any:
    from perfconsole.core.cli.tables import CliTable, Column
    from perfconsole.core.profiling.ncu_kernels import function_name
    from perfconsole.core.profiling.ncu_summary import REPLAY_WORDS

    per = ", replay" if replay else "/step"  # an import of ncu's pages alone: its times are ncu's replays
    t = CliTable(f"{name}: why the kernels take their time (Nsight Compute"
                 + (f"; times: {REPLAY_WORDS})" if replay else ")"), [
        Column(f"gain (ms{per})"), Column(f"time (ms{per})"), Column("step (%)"), Column("compute (%)"),
        Column("memory (%)"), Column("bound", "label"), Column("TFLOP/s"), Column("of peak (%)"), Column("GB/s"),
        Column("of BW (%)"), Column("FLOP/B"), Column("side", "label"), Column("occupancy (%)"),
        Column("top rule", "label"), Column("est. (%)"), Column("kernel", "name")], title_justify="left")
    for r in rows:
        t.add_row(_num(r["gain_ms"], ",.3f"), _num(r["ms_per_step"], ",.3f"),
                  _num(r["step_share"] * 100 if r["step_share"] is not None else None, ".1f"),
                  _num(r["compute_pct"], ".1f"), _num(r["memory_pct"], ".1f"), r["bound"] or "-",
                  _num(r["tflops"], ",.1f"), _num(r["tflops_pct"], ".1f"), _num(r["gbps"], ",.0f"),
                  _num(r["gbps_pct"], ".1f"), _num(r["intensity"], ",.1f"), r["side"] or "-",
                  _num(r["achieved_occupancy_pct"], ".1f"), r["rule"] or "-", _num(r["rule_speedup_pct"], ".1f"),
                  r["name"])
    lines = [f"{i}. {function_name(r['name'])}, {r['rule']}: {r['rule_text']}" for i, r in enumerate(rows, 1)
             if r["rule"] and r["rule_text"]]
    t.caption = "\n".join([*lines, *notes])
    return t


def time_table(record: RunRecord, rows: list[dict[str, Any]]) -> Any:
    from perfconsole.core.cli.tables import CliTable, Column

    from perfconsole.core.profiling.ncu_summary import REPLAY_NOTE, REPLAY_WORDS

    replay = bool(record.profile and loaded_of(record.profile).replay)
    t = CliTable(f"{record.name}: kernels by {REPLAY_WORDS if replay else 'time'} "
                 f"(top {min(TOP_ROWS, len(rows))} of {len(rows)})",
                 [Column("time (%)"), Column("total (ms)"), Column("count"), Column("avg (us)"), Column("name", "name")],
                 title_justify="left")
    for r in rows[:TOP_ROWS]:
        t.add_row(_num(r.get("time_pct"), ".1f"), _num((r.get("total_time_ns") or 0) / 1e6, ",.3f"),
                  str(r.get("instances", "")), _num((r.get("avg_ns") or 0) / 1e3, ",.1f"), r["name"])
    if replay:
        t.caption = f"{REPLAY_NOTE}; count: the launches ncu profiled. Why each takes its time: perfconsole " \
                    "kernels RUN.json --why"
    elif record.profile and record.profile.tables.get("ncu_kernels"):
        t.caption = "Nsight Compute profiled some of them: perfconsole kernels RUN.json --why"
    return t


def _print(table: Any) -> int:
    from rich.console import Console

    with reader_may_be_gone():
        Console().print(table)
    return 0


def _print_json(doc: dict[str, Any]) -> int:
    with reader_may_be_gone():
        print(json.dumps(doc, indent=1, allow_nan=False, default=str))
    return 0

"""`perfconsole run`: one benchmark in a child process, shown as a table or, with --json, as the run's
snapshot (the same text --save writes). Ctrl-C, SIGTERM and SIGHUP cancel the child and keep, save and
print the steps measured so far; the exit code is then 128 + the signal's number."""
from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.text import Text

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.cli.main import (EXIT_CANCELLED, EXIT_ERROR, EXIT_OK, EXIT_OOM, EXIT_USAGE, UsageError,
                                        add_force_argument, add_spec_arguments, deliver, save_path,
                                        spec_from_args)
from perfconsole.core.cli.executor import add_executor_arguments, executor_from_args, nodes_note
from perfconsole.core.cli.tables import CliTable, Column
from perfconsole.core.flops import beaten_text, peaks_text
from perfconsole.core.launch.launcher import Launch
from perfconsole.core.launch.replicates import RepeatedLaunch, make_launch
from perfconsole.core.launch.scaling import ScalingLaunch
from perfconsole.core.launch.processes import Stop, install_exit_handlers
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.parallel import job_line
from perfconsole.core.reports.run import host_flag, start_text, tflops_text
from perfconsole.core.stats import MEDIAN_CI_MIN_N, Stat, interval_text, median_interval_text
from perfconsole.core.run_summary import busy_sentence

# unsupported: the spec asks for what this machine lacks (a GPU, perfconsole[fast]); like bad input, not a crash.
EXIT_BY_STATUS = {"ok": EXIT_OK, "oom": EXIT_OOM, "cancelled": EXIT_CANCELLED, "unsupported": EXIT_USAGE}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="benchmark one configuration in a child process")
    add_spec_arguments(p)
    p.add_argument("--json", action="store_true",
                   help="print the run's snapshot (what --save writes) instead of a table")
    p.add_argument("--save", default=None, metavar="FILE", help="save the run snapshot (JSON) here")
    add_force_argument(p)
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="a saved one-process run of the same spec, for a job's weak-scaling efficiency")
    p.add_argument("--nsys", default=None, metavar="PATH", help="the nsys binary for --profile nsys")
    p.add_argument("--out-dir", default=None, help="where profiler files go (default: a folder beside --save named "
                                                  "after it, prof/ for prof.json; else the data directory's runs/)")
    add_executor_arguments(p, nodes=True)
    p.set_defaults(func=run)


def execute(record: RunRecord, launch: Launch | RepeatedLaunch | ScalingLaunch, progress: Console | None, stop: Stop) -> RunRecord:
    """Stream the launch into the record; a stop signal cancels the run and keeps what was measured."""
    launch.start()
    with stop.cancelling(launch.cancel):
        for event in launch.events():
            record.apply(event)
            if progress is not None:
                try:
                    _show(progress, record, event)
                except OSError:  # stderr has gone (a dropped SSH session): keep measuring, say nothing
                    progress = None
    return record


def _show(c: Console, r: RunRecord, e: ev.Event) -> None:
    s = r.spec
    if isinstance(e, ev.Progress):
        if e.stage == "replicate":  # the Replicate marker beside it says so, once
            return
        c.print(Text.assemble((f"{e.stage}:", "dim"), f" {e.detail}" if e.detail else ""), soft_wrap=True)
    elif isinstance(e, ev.StartPhases):
        c.print(Text(start_text(e.phases, e.compile_cache)), soft_wrap=True)
    elif isinstance(e, ev.Replicate):
        c.print(f"[bold]process {e.index + 1} of {e.of}[/]")
    elif isinstance(e, ev.Step):
        n = f"warm-up {e.index + 1}/{s.warmup}" if e.warmup else f"step {e.index - s.warmup + 1}/{s.steps}"
        c.print(f"  {n}: {e.total_ms:.3f} ms")
    elif isinstance(e, ev.Error):
        # Text, not markup: a reason may hold brackets ("install perfconsole[fast]"). Input the worker refused
        # reads as input refused before launch does.
        text = f"perfconsole: error: {e.message}" if e.kind == "spec" else e.text()
        c.print(Text(text, style="bold red"), soft_wrap=True)  # one line, however long: the terminal wraps it


def summary_table(r: RunRecord) -> CliTable:
    """Step statistics per phase; printed fitted to a terminal or tab-separated (core/cli/tables.py). The
    interval is the median's, beside it (core.stats.median_interval)."""
    t = CliTable(f"{r.name} — {r.status}", [Column("phase", "label")] + [Column(f"{k} (ms)") for k in
                 ("mean", "std", "median", "median 95% CI", "min", "max")], title_justify="left")
    sm = r.summary
    if sm is None:
        return t
    for name in ("forward_ms", "backward_ms", "optimizer_ms", "total_ms"):
        st = getattr(sm, name)
        if st is not None:
            std = f"{st.std:,.3f}" if st.n > 1 else "-"  # one step has no spread, not a spread of 0
            t.add_row(name[:-3], f"{st.mean:,.3f}", std, f"{st.median:,.3f}", median_interval_text(st),
                      f"{st.min:,.3f}", f"{st.max:,.3f}")
    t.caption = (f"{sm.tokens_per_s:,.0f} tokens/s · {tflops_text(sm.achieved_tflops)} TFLOP/s"
                 + (f" · MFU {sm.mfu:.1%}" if sm.mfu is not None else "")
                 + (f" · peak {sm.peak_allocated_mib:,.0f} MiB allocated" if sm.peak_allocated_mib else "")
                 + (f" · warm-up {', '.join(f'{w:.1f}' for w in sm.warmup_ms)} ms" if sm.warmup_ms else ""))
    sol = sm.speed_of_light or {}
    if beaten_text(sol):
        t.caption += "\n" + str(beaten_text(sol))
    elif "total_ms" in sol:
        phases = ", ".join(f"{k[:-3]} {sol[k]['fraction']:.0%}" for k in ("forward_ms", "backward_ms", "optimizer_ms")
                           if k in sol and sol[k]["fraction"] is not None)
        t.caption += (f"\nspeed of light: floor {sol['total_ms']['floor_ms']:,.3f} ms, "
                      f"{sol['total_ms']['fraction']:.1%} of it ({phases})")
    else:  # no floor against figures the run lacks: why not, instead
        t.caption += f"\nspeed of light: not shown, {peaks_text(r.peaks)}"
    busy = busy_sentence(sm.gpu_busy_share, sm.gpu_busy_source, sm.bound)
    if busy is not None:
        t.caption += "\n" + busy
    job = job_line(r)
    if job is not None:
        t.caption += "\n" + job + ("\nthe steps are the slowest rank's; tokens/s, TFLOP/s and MFU are the job's"
                                   if r.ranks else "")
    b = (sm.between_processes or {}).get("total_ms")
    if b is not None:
        t.caption += (f"\nstep between {b.n} processes (statistics of their medians): median {b.median:.3f} ms"
                      f"{between_interval(b)}; the rows above pool their steps") + nodes_note(r)
    if sm.total_ms.too_few:
        t.caption += (f"\n{sm.total_ms.n} measured steps: too few for the median's 95% interval ({MEDIAN_CI_MIN_N} "
                      f"needed, --steps {MEDIAN_CI_MIN_N} or more); min and max bound them")
    elif b is None and sm.processes == 1 and sm.total_ms.n > 1 and job is None:
        t.caption += "\nthe median's 95% interval covers this one process; --repeat N measures the spread between processes"
    elif sm.total_ms.n == 1:
        t.caption += "\none measured step: no spread and no interval (--steps 2 or more for those)"
    host = host_flag(r.host, r.spec.steps)
    if host is not None:
        t.caption += "\n" + host
    if r.profile is not None:
        t.caption += "\n" + profile_caption(r)
    return t


def between_interval(b: Stat) -> str:
    """The interval of the processes' median, or why there is none: too few processes, with their range."""
    if b.too_few:
        return (f", too few processes for its 95% interval ({MEDIAN_CI_MIN_N} needed), "
                f"range {interval_text(b.min, b.max)} ms")
    return f", 95% CI {interval_text(b.ci95_low, b.ci95_high)} ms" if b.ci95_low is not None else ""


def profile_caption(r: RunRecord) -> str:
    """Where the profile went and what it says, in a line or two (the full tables: `perfconsole import`)."""
    from perfconsole.core.reports.profile import headline  # pandas: only for a run that has a profile

    p = r.profile
    assert p is not None
    kernels = p.tables.get("cuda_gpu_kern_sum") or []
    top = max(kernels, key=lambda k: k.get("total_time_ns") or 0, default=None)
    text = f"profile ({p.profiler}): {len(kernels)} kernels"
    if top is not None:
        text += f", top {top['name'][:60]} ({top.get('time_pct', 0):.1f}%)"
    line = headline(p, r.summary, len(r.steps) or None)
    if line:
        text += f"\n{line}"
    if p.files:
        text += "\nfiles: " + ", ".join(p.files) + " (perfconsole import FILE shows every table)"
    return text


def _baseline(path: str, spec) -> ev.Baseline:
    from perfconsole.core.launch.scaling import saved_baseline
    from perfconsole.core.settings import SpecError

    if spec.nproc == 1 or spec.scaling:
        raise SpecError("baseline", "is for a job of nproc 2 or more without --scaling")
    try:
        saved = store.load(Path(path))
    except store.SnapshotError as exc:  # its text names the file already
        raise UsageError(str(exc)) from exc
    if not isinstance(saved, RunRecord):
        raise SpecError("baseline", f"{path} is a {saved.kind} snapshot, not a run")
    return saved_baseline(saved, spec)


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    save = save_path(args.save, args.force)
    out_dir = Path(args.out_dir) if args.out_dir else (save.with_suffix("") if save else None)
    executor = executor_from_args(args, nproc=spec.nproc, device=spec.device)
    stop = install_exit_handlers()
    record = RunRecord(spec)
    if args.baseline:
        record.apply(_baseline(args.baseline, spec))
    err = Console(stderr=True, highlight=False)
    execute(record, make_launch(spec, out_dir=out_dir, nsys=args.nsys, executor=executor), err, stop)
    code = EXIT_BY_STATUS.get(record.status, EXIT_ERROR)
    refused = record.status == "error" and record.error is not None and record.error.kind == "spec"
    if refused:
        code = EXIT_USAGE  # the worker refused the input (a model that cannot be built): bad input
    # An unsupported or refused spec measured nothing: its one line on stderr says why, and stdout stays empty
    # rather than holding a table with a header and no rows.
    table = (lambda: None) if record.status == "unsupported" or refused else (lambda: summary_table(record))
    return deliver(store.dumps(record), table, save, args.json, err, stop, code)

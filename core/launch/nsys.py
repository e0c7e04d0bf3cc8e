"""The nsys side of a launch: wrap the worker's command in `nsys profile`, and once the child has
finished, export the capture's tables with `nsys stats` as events."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from perfconsole.core import events as ev
from perfconsole.core.launch.processes import run_to_end
from perfconsole.core.profiling.errors import NsysError
from perfconsole.core.profiling.locate import NsysInfo, find_nsys
from perfconsole.core.profiling.nsys_run import export_stats, profile_command

__all__ = ["NsysError", "find_nsys", "profile_command", "stats_events"]


def stats_events(nsys: NsysInfo, rep_base: Path, out_dir: Path, other_stdout: Iterable[str]) -> Iterator[ev.Event]:
    """`nsys stats` over the finished capture: progress, then the tables (or the error, with nsys's output).
    The last lines nsys printed while the child ran (processes.STDERR_TAIL of them) are kept beside the
    capture, as `<capture>.nsys-output.txt`."""
    rep = rep_base.with_suffix(".nsys-rep")
    other_stdout = list(other_stdout)
    said = rep_base.with_name(rep_base.name + ".nsys-output.txt")
    try:
        said.write_text("".join(line + "\n" for line in other_stdout), encoding="utf-8")
    except OSError:
        said = None
    yield ev.Progress("profiling", "nsys stats: exporting tables")
    try:
        tables, files, warnings = export_stats(nsys, rep, out_dir, run=run_to_end)  # killed with the console
    except NsysError as exc:
        yield ev.Error("profiler", f"nsys stats failed: {exc}", "\n".join(other_stdout))
        return
    for w in warnings:
        yield ev.Progress("profiling", w)
    yield ev.ProfileReady("nsys", [str(rep), *files, *([str(said)] if said else [])], tables, warnings=list(warnings))

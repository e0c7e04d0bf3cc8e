"""Run the worker under `nsys profile`, then turn the .nsys-rep into tables with `nsys stats`.

Every command is an argument list with a timeout. `nsys stats` runs once per report so that one
report that fails or is SKIPPED costs a warning, not the run, and progress can be shown per report.
A launch runs it through core.launch.processes.run_to_end (`run`), so that a console that dies during the
export leaves no nsys behind; a command that only reads a report runs it plainly.
"""
from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from perfconsole.core.profiling.columns import Tables
from perfconsole.core.profiling.errors import NsysError
from perfconsole.core.profiling.locate import NsysInfo
from perfconsole.core.profiling.stats_text import parse_stats_text

EXPORT_REPORTS = ("cuda_gpu_kern_sum", "nvtx_sum", "nvtx_kern_sum", "cuda_api_sum",
                  "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum")
STATS_TIMEOUT_S = 900.0

# (argv, timeout in s) -> the finished process, its output captured as text; subprocess.TimeoutExpired past it.
RunTool = Callable[[list[str], float], "subprocess.CompletedProcess[str]"]


def run_plainly(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


def profile_command(nsys: NsysInfo, argv: list[str], output_base: Path) -> list[str]:
    """`nsys profile ... <worker argv>` capturing only what lies between cudaProfilerStart/Stop.

    The worker calls torch.cuda.profiler.start()/stop() around the measured steps, so model build and
    warm-up stay out of the report; CPU sampling and context-switch tracing are off to keep overhead low.
    """
    return [
        nsys.path, "profile",
        "--trace=cuda,nvtx,cublas", "--sample=none", "--cpuctxsw=none",
        "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
        "-o", str(output_base), "--force-overwrite=true",
        *argv,
    ]


def stats_command(nsys: NsysInfo, report: str, rep: Path, prefix: Path, force_export: bool) -> list[str]:
    return [nsys.path, "stats", "--report", report, "--format", "csv",
            f"--force-export={'true' if force_export else 'false'}", "-o", str(prefix), str(rep)]


def export_stats(nsys: NsysInfo, rep: Path, out_dir: Path, on_progress: Callable[[str], None] | None = None,
                 timeout_s: float = STATS_TIMEOUT_S, run: RunTool = run_plainly) -> tuple[Tables, list[str], list[str]]:
    """(tables, CSV files written, warnings) for EXPORT_REPORTS; NsysError only when no report could be read."""
    rep = Path(rep)
    if not rep.is_file():
        raise NsysError(f"{rep}: no such report file")
    out_dir.mkdir(parents=True, exist_ok=True)
    prefix = out_dir / rep.name.removesuffix(".nsys-rep").removesuffix(".qdrep")
    tables: Tables = {}
    files: list[str] = []
    warnings: list[str] = []
    for i, report in enumerate(EXPORT_REPORTS):
        if on_progress:
            on_progress(f"nsys stats {report} ({i + 1}/{len(EXPORT_REPORTS)})")
        csv_path = Path(f"{prefix}_{report}.csv")
        csv_path.unlink(missing_ok=True)  # a stale file from an earlier export must not pass for this one
        try:
            proc = run(stats_command(nsys, report, rep, prefix, force_export=(i == 0)), timeout_s)
        except subprocess.TimeoutExpired:
            warnings.append(f"nsys stats {report}: timed out after {timeout_s:.0f} s")
            continue
        except OSError as exc:
            raise NsysError(f"{nsys.path}: cannot run nsys stats ({exc})") from None
        said = proc.stdout + proc.stderr
        if "SKIPPED:" in said:
            reason = said.split("SKIPPED:", 1)[1].strip().splitlines()[0]
            warnings.append(f"{report} absent (nsys SKIPPED it: {reason})")
            continue
        if not csv_path.is_file():
            tail = said.strip().splitlines()[-1:] or [""]
            warnings.append(f"nsys stats {report}: exit {proc.returncode}, no {csv_path.name} ({tail[0][:200]})")
            continue
        files.append(str(csv_path))
        parsed = parse_stats_text(csv_path.read_text(encoding="utf-8", errors="replace"), str(csv_path), report)
        warnings.extend(parsed.warnings)
        if report in parsed.tables:
            tables[report] = parsed.tables[report]
        elif not parsed.warnings:
            warnings.append(f"{csv_path}: no {report} table in the file nsys wrote")
    if not tables:
        detail = f": {warnings[0]}" if warnings else ""
        raise NsysError(f"{rep}: nsys stats produced no readable report{detail}")
    return tables, files, warnings

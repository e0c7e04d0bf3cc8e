"""Nsight Compute (`ncu`) as a tool: find it, say which metrics to ask of it, wrap a worker's command in it,
read its report back as CSV pages, and turn what its log says into one line a user can act on.

The command profiles only what runs between cudaProfilerStart and cudaProfilerStop (`--profile-from-start
off`: the worker opens that range around one step after its quiet ones, so neither the warm-up nor the quiet
steps are measured), only the kernels named (`--kernel-name regex:`, on function names), and each launch
configuration of them once (`--filter-mode per-launch-config --launch-count 1`; named by function, so a
template's every instantiation). Clocks are left as the
program runs them (`--clock-control none`), so achieved rates compare with the measured peaks; ncu still
replays each kernel many times with its caches flushed between passes, so its durations are not the timed
step's.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from perfconsole.core.profiling.ncu_kernels import function_name, sass_metrics, tensor_metric_names

NCU_ENV = "PERFCONSOLE_NCU"
INSTALL_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu", "/usr/local/cuda*/nsight-compute*/ncu")
SECTIONS = ("SpeedOfLight", "SpeedOfLight_RooflineChart", "Occupancy", "LaunchStats")
BASE_METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
QUERY_TIMEOUT_S = 120.0
EXPORT_TIMEOUT_S = 300.0
PERMISSION = "ERR_NVGPUCTRPERM"
Run = Callable[[list[str], float], subprocess.CompletedProcess]


class NcuError(Exception):
    """ncu could not profile or its report could not be read: one line."""


def find_ncu(env: dict[str, str] | None = None) -> str | None:
    """$PERFCONSOLE_NCU, then `ncu` on PATH, then the usual install places (newest version first)."""
    env = os.environ if env is None else env
    named = env.get(NCU_ENV)
    if named:
        return named if os.access(named, os.X_OK) else None
    found = shutil.which("ncu", path=env.get("PATH"))
    if found:
        return found
    for pattern in INSTALL_GLOBS:
        hits = sorted((p for p in glob.glob(pattern) if os.access(p, os.X_OK)), key=_version_key, reverse=True)
        if hits:
            return hits[0]
    return None


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def missing_text() -> str:
    return (f"--profile ncu needs Nsight Compute's ncu, and none was found (${NCU_ENV}, PATH, "
            "/opt/nvidia/nsight-compute/*/ncu, /usr/local/cuda*/bin/ncu); install Nsight Compute or set "
            f"{NCU_ENV}, or use --profile torch or nsys for the kernels' times")


def version(ncu: str, run: Run) -> str:
    try:
        proc = run([ncu, "--version"], QUERY_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", proc.stdout or "")
    return found.group(1) if found else "unknown"


def device_metric_names(ncu: str, run: Run) -> list[str]:
    """The base metric names the device offers (`ncu --query-metrics`); empty where ncu could not say."""
    try:
        proc = run([ncu, "--query-metrics"], QUERY_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return []
    return re.findall(r"^([a-z0-9_]+__[a-z0-9_]+)\s", proc.stdout or "", flags=re.M)


def metrics_to_ask(names: Sequence[str]) -> list[str]:
    """The counters beside the sections: duration and DRAM bytes (every device's), the SASS FLOP counters
    (ncu's roofline) and the tensor pipes' op counters the device has. Where the device's list is known, one it
    lacks is left out (ncu refuses the whole run for one unknown metric)."""
    if not names:
        return [*BASE_METRICS, *sass_metrics()]
    have = set(names)
    optional = [*sass_metrics(), *tensor_metric_names(list(names))]
    return [*BASE_METRICS, *(m for m in optional if m.split(".")[0] in have)]


def kernel_regex(names: Sequence[str]) -> str:
    """One regex for the kernels' function names (ncu's `--kernel-name-base function`): each function whole,
    whether or not ncu puts its namespace before it. A template's every instantiation shares its function's
    name, so all of them are profiled (each launch configuration once) and the join by name keeps them apart."""
    parts = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", f) for f in dict.fromkeys(map(function_name, names)) if f]
    return "(^|[: ])(" + "|".join(parts) + ")($|[<(])"


def profile_command(ncu: str, kernels: Sequence[str], metrics: Sequence[str], rep_base: Path, log: Path,
                    argv: list[str]) -> list[str]:
    cmd = [ncu, "--profile-from-start", "off", "--target-processes", "application-only",
           "--kernel-name-base", "function", "--kernel-name", "regex:" + kernel_regex(kernels),
           "--filter-mode", "per-launch-config", "--launch-skip", "0", "--launch-count", "1",
           "--clock-control", "none"]
    for section in SECTIONS:
        cmd += ["--section", section]
    cmd += ["--metrics", ",".join(metrics), "--log-file", str(log), "--export", str(rep_base), "--force-overwrite"]
    return cmd + argv


def export_pages(ncu: str, rep: Path, out_dir: Path, run: Run) -> tuple[Path, Path]:
    """The report's details and raw pages as CSV files beside it (kernel names demangled, units as ncu
    scales them: the reader undoes the scaling)."""
    files = []
    for page in ("details", "raw"):
        argv = [ncu, "--import", str(rep), "--csv", "--page", page, "--print-kernel-base", "demangled"]
        try:
            proc = run(argv, EXPORT_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise NcuError(f"ncu --import {rep.name} --page {page} took over {EXPORT_TIMEOUT_S:.0f} s") from exc
        except OSError as exc:
            raise NcuError(f"ncu --import {rep.name}: {exc}") from exc
        if proc.returncode != 0 or '"ID"' not in (proc.stdout or ""):
            said = " ".join((proc.stderr or proc.stdout or "").split())[:300]
            raise NcuError(f"ncu --import {rep.name} --page {page} failed (exit {proc.returncode}): {said}")
        path = out_dir / f"ncu_{page}.csv"
        path.write_text(proc.stdout, encoding="utf-8")
        files.append(path)
    return files[0], files[1]


def diagnose(log_text: str, rep_exists: bool, kernels: Sequence[str]) -> str | None:
    """What went wrong, from ncu's log, in one line; None when the report is there to read."""
    if PERMISSION in log_text:
        return (f"ncu may not read the GPU's performance counters here ({PERMISSION}): run as root, or let "
                "every user profile (the nvidia module's option NVreg_RestrictProfilingToAdminUsers=0, see "
                "https://developer.nvidia.com/ERR_NVGPUCTRPERM); the timed run is kept")
    if "No kernels were profiled" in log_text or not rep_exists:
        seen = _kernels_seen(log_text)
        asked = "; ".join(k[:60] for k in kernels[:5])
        tail = f"; ncu saw: {'; '.join(seen[:8])}" if seen else ""
        errors = [ln.strip() for ln in log_text.splitlines() if ln.startswith("==ERROR==")]
        if errors and not seen:
            return f"ncu profiled nothing: {errors[0][10:][:240]}"
        return f"ncu's kernel filter matched nothing in the profiled step (asked for: {asked}){tail}"
    return None


def _kernels_seen(log_text: str) -> list[str]:
    """The kernels ncu lists after `Available Kernels:` when its filter matched none."""
    lines = log_text.splitlines()
    start = next((i for i, ln in enumerate(lines) if "Available Kernels" in ln), None)
    if start is None:
        return []
    seen = []
    for ln in lines[start + 1:]:
        item = re.sub(r"^\s*(==\w+==)?\s*\d+\.\s*", "", ln).strip()
        if not item or ln.startswith("==PROF==") or ln.startswith("==ERROR=="):
            break
        seen.append(item[:80])
    return seen

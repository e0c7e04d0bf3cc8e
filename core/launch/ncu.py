"""Nsight Compute (`ncu`) as a tool: find it, say which metrics to ask of it, wrap a worker's command in it,
read its report back as CSV pages, and turn what its log says into one line a user can act on.

The command profiles only what runs between cudaProfilerStart and cudaProfilerStop (`--profile-from-start
off`: the worker opens that range around one step after its quiet ones, so neither the warm-up nor the quiet
steps are measured), only the kernels named (`--kernel-name regex:` on the demangled names, matching the
functions named: a template's every instantiation), and each launch configuration of them once (`--filter-mode
per-launch-config --launch-count 1`). ncu tells configurations apart by the name of `--kernel-name-base`: under
`function` two instantiations launched with one grid and block are one configuration and the second is never
profiled (a float multiply beside a float fill of the same size: docs/results/ncu_launch_config.md), so the
base is `demangled`. Clocks are left as the program runs them (`--clock-control none`), so achieved rates
compare with the measured peaks; ncu still replays each kernel many times with its caches flushed between
passes, so its durations are not the timed step's.
"""
from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from perfconsole.core.profiling.ncu_kernels import function_name, sass_metrics, tensor_metric_names
from perfconsole.core.profiling.ncu_report import (  # noqa: F401  (the launch's names for them)
    EXPORT_TIMEOUT_S, INSTALL_GLOBS, NCU_ENV, NcuError, Run, export_pages, find_ncu)

SECTIONS = ("SpeedOfLight", "SpeedOfLight_RooflineChart", "Occupancy", "LaunchStats")
BASE_METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum")
QUERY_TIMEOUT_S = 120.0
PERMISSION = "ERR_NVGPUCTRPERM"


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
    """One regex that finds the kernels' functions in ncu's demangled names (`void at::native::f<4, …>(int, …)`,
    `nvjet_…`): each function whole, after its namespace or at the start. Every instantiation of a template
    matches, so all of them are profiled (each launch configuration once) and the join by name keeps them apart."""
    parts = [re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", f) for f in dict.fromkeys(map(function_name, names)) if f]
    return "(^|[: ])(" + "|".join(parts) + ")($|[<(])"


def profile_command(ncu: str, kernels: Sequence[str], metrics: Sequence[str], rep_base: Path, log: Path,
                    argv: list[str]) -> list[str]:
    cmd = [ncu, "--profile-from-start", "off", "--target-processes", "application-only",
           "--kernel-name-base", "demangled", "--kernel-name", "regex:" + kernel_regex(kernels),
           "--filter-mode", "per-launch-config", "--launch-skip", "0", "--launch-count", "1",
           "--clock-control", "none"]
    for section in SECTIONS:
        cmd += ["--section", section]
    cmd += ["--metrics", ",".join(metrics), "--log-file", str(log), "--export", str(rep_base), "--force-overwrite"]
    return cmd + argv


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

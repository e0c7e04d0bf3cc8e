"""Nsight Compute's `ncu` found on this machine, and a report (`.ncu-rep`) read back as its CSV pages: what both
`run --profile ncu` (core.launch.ncu) and `perfconsole import` of a report need."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

NCU_ENV = "PERFCONSOLE_NCU"
INSTALL_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu", "/usr/local/cuda*/nsight-compute*/ncu")
EXPORT_TIMEOUT_S = 300.0
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

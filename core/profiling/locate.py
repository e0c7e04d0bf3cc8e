"""Find the nsys executable and its version.

Search order (issue 3): an explicit `--nsys PATH`, then `PERFCONSOLE_NSYS`, then PATH, then the usual
install places, newest version first. An explicit path or variable that does not work is an error,
not a silent fallback: the user asked for that binary.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from perfconsole.core.profiling.errors import NsysError

INSTALL_GLOBS: tuple[str, ...] = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)
VERSION_TIMEOUT_S = 30.0
_VERSION = re.compile(r"(\d{4}\.\d+(?:\.\d+)*)")


@dataclass(frozen=True)
class NsysInfo:
    path: str
    version: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "version": self.version}


def nsys_version(path: str) -> str:
    """`2024.5.1.113` from `nsys --version`; raises NsysError when the binary does not answer."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysError(f"{path}: cannot run nsys --version ({exc})") from None
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        raise NsysError(f"{path}: nsys --version exited {proc.returncode}: {text[:200]}")
    m = _VERSION.search(text)
    return m.group(1) if m else text.splitlines()[0] if text else "unknown"


def _version_key(path: str) -> tuple[int, ...]:
    m = _VERSION.search(path) or re.search(r"(\d+(?:\.\d+)+)", path)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def _installed(globs: Sequence[str]) -> list[str]:
    found: list[str] = []
    for pattern in globs:
        found.extend(sorted(glob.glob(pattern), key=_version_key, reverse=True))
    return found


def _usable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_nsys(explicit: str | None = None, env: Mapping[str, str] | None = None,
              globs: Sequence[str] = INSTALL_GLOBS) -> NsysInfo | None:
    """The nsys to use, or None when there is none (the caller falls back to torch.profiler)."""
    env = os.environ if env is None else env
    for origin, chosen in (("--nsys", explicit), ("PERFCONSOLE_NSYS", env.get("PERFCONSOLE_NSYS") or None)):
        if chosen:
            if not _usable(chosen):
                raise NsysError(f"{origin} {chosen}: not an executable file")
            return NsysInfo(chosen, nsys_version(chosen))
    on_path = shutil.which("nsys", path=env.get("PATH"))
    for candidate in ([on_path] if on_path else []) + _installed(globs):
        if not _usable(candidate):
            continue
        try:
            return NsysInfo(candidate, nsys_version(candidate))
        except NsysError:
            continue  # a broken copy in a default place: try the next one
    return None


def describe(info: NsysInfo | None) -> str:
    """One line for the console and logs."""
    if info is None:
        return "nsys not found (--nsys, PERFCONSOLE_NSYS, PATH, /opt/nvidia, /usr/local/cuda*): using torch.profiler"
    return f"nsys {info.version} at {info.path}"

"""Where perfconsole keeps its files, and the checks on paths that users hand over."""
from __future__ import annotations

import os
import re
from pathlib import Path


class PathError(ValueError):
    pass


# A file that is not there, said alike by every command and the console (the OS's own words, in lower case as
# every other error line here is).
NO_SUCH_FILE = "no such file or directory"


def data_dir() -> Path:
    """PERFCONSOLE_DATA_DIR, else $XDG_DATA_HOME/perfconsole, else ~/.local/share/perfconsole."""
    env = os.environ.get("PERFCONSOLE_DATA_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "perfconsole"


def check_data_dir() -> Path:
    """The data directory, or a PathError when it cannot be one: it, or a folder on the way to it, is a file.

    Checked before anything starts: the console, `serve` and the measuring commands keep the warm process's
    socket, the peaks and FLOP caches, profiles and saved runs there, and a file in its place would fail deep
    inside them instead (`NotADirectoryError: .../warm`)."""
    path = data_dir()
    for p in (path, *path.parents):
        if p.exists():
            if p.is_dir():
                break
            problem = "a file, not a directory" if p == path else f"{p} is a file, not a directory"
            env = os.environ.get("PERFCONSOLE_DATA_DIR")
            raise PathError(f"PERFCONSOLE_DATA_DIR={env}: {problem}; give it a directory (one not there yet is "
                            "created)" if env else
                            f"the data directory {path}: {problem}; set PERFCONSOLE_DATA_DIR to a directory")
    return path


def runs_dir() -> Path:
    return data_dir() / "runs"


def compile_cache_dir(torch_version: str) -> Path:
    """torch.compile's caches (core.measure.compile_cache), one folder per torch version: another torch never
    reads what this one wrote."""
    return data_dir() / "compile-cache" / f"torch-{safe_name(torch_version)}"


def shipped_snapshots_dir() -> Path | None:
    """The example snapshots in the source tree's snapshots/ folder, when running from a checkout."""
    here = Path(__file__).resolve().parent.parent / "snapshots"
    return here if here.is_dir() else None


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str, max_len: int = 80) -> str:
    """A file name made from user text: no separators, no leading dots, never empty."""
    cleaned = _SAFE.sub("_", name).strip("._")[:max_len]
    return cleaned or "run"


def output_file(path: str | os.PathLike[str], overwrite: bool = True) -> Path:
    """Check a path a user gave for writing: not a directory, parent exists."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise PathError(f"{p}: is a directory, give a file name")
    if not p.parent.exists():
        raise PathError(f"{p.parent}: no such directory")
    if p.exists() and not overwrite:
        raise PathError(f"{p}: exists")
    return p


def input_file(path: str | os.PathLike[str]) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise PathError(f"{p}: {NO_SUCH_FILE}")
    if not p.is_file():
        raise PathError(f"{p}: not a file")
    return p

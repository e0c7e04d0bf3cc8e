"""The FLOP counts the suite's runs share, as a user's data folder keeps them from run to run.

A run counts its model's FLOPs once per model, shape and batch and keeps the count in its data folder
(core.measure.model_build, flops.json). Each test has a folder of its own, so without this every run of the
end-to-end tier counted again: in a cold worker that is torch's compiler stack imported for the FLOP
counter's decompositions, about 1.9 CPU-s a run on the 2-core machine (docs/results/test_suite_time.md).

An end-to-end test's folder starts with the counts of the session so far (all xdist workers share them), and
what its runs counted joins them when it ends. Only the built-in model's counts travel (a factory's count
belongs to its file); the tests of the count itself run in-process, in the fast tier, or on a fresh folder,
and count.
"""
from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from perfconsole.core.flops import FLOPS_FILE as CACHE_FILE


def _builtin(key: str) -> bool:
    try:
        return json.loads(key)[2] == "builtin"
    except (ValueError, IndexError, TypeError):
        return False


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def seed(session: Path, folder: Path) -> None:
    """Give `folder` the session's counts."""
    shared = _read(session / CACHE_FILE)
    if shared:
        (folder / CACHE_FILE).write_text(json.dumps(shared, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def keep(session: Path, folder: Path) -> None:
    """Add the built-in model's counts that `folder`'s runs made to the session's, under a lock (another xdist
    worker may be adding its own)."""
    new = {k: v for k, v in _read(folder / CACHE_FILE).items()
           if _builtin(k) and isinstance(v, dict) and v.get("flops_source") == "counted"}
    if not new:
        return
    with (session / "flops.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shared = _read(session / CACHE_FILE)
        if new.keys() <= shared.keys():
            return
        tmp = session / f"{CACHE_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(shared | new, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, session / CACHE_FILE)

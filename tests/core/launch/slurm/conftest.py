"""The `slurm` tests run against a real Slurm: the one-node cluster scripts/local_slurm.sh starts (.ci/run
starts it before the tests). Without one they skip with the reason, unless PERFCONSOLE_REQUIRE_SLURM=1
(set by .ci/run), where they fail with it."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

LOCAL_CONF = Path(os.environ.get("PERFCONSOLE_SLURM_DIR", "/tmp/perfconsole-slurm")) / "slurm.conf"


def _why_not() -> str | None:
    """None when sinfo answers with a usable node; else the reason."""
    if "SLURM_CONF" not in os.environ and LOCAL_CONF.is_file():
        os.environ["SLURM_CONF"] = str(LOCAL_CONF)
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        return "no sinfo on PATH: Slurm is not installed (scripts/local_slurm.sh start installs and starts it)"
    except subprocess.TimeoutExpired:
        return "sinfo gave no answer in 20 s: slurmctld is not answering"
    states = done.stdout.split()
    if done.returncode != 0 or not any(s.rstrip("*~#") in ("idle", "mix", "alloc") for s in states):
        last = (done.stderr.strip().splitlines() or [f"node states {states}"])[-1]
        return f"no usable Slurm node ({last}); start one with scripts/local_slurm.sh start"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """The SLURM_CONF of a running cluster, or a skip (a failure under PERFCONSOLE_REQUIRE_SLURM=1)."""
    why = _why_not()
    if why is not None:
        if os.environ.get("PERFCONSOLE_REQUIRE_SLURM") == "1":
            pytest.fail(f"Slurm is required here (PERFCONSOLE_REQUIRE_SLURM=1) but cannot be used: {why}")
        pytest.skip(why)
    return os.environ.get("SLURM_CONF", "")


def squeue(name: str = "perfconsole") -> list[str]:
    """This user's jobs of that name still queued or running, as 'id state' lines."""
    out = subprocess.run(["squeue", "-h", "--me", "-n", name, "-o", "%i %T"], capture_output=True, text=True,
                         timeout=20)
    return [ln for ln in out.stdout.splitlines() if ln.strip()]

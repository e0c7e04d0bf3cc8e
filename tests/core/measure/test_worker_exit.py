"""A worker ends without the interpreter's teardown of torch once its events are out (0.7 s after every run
on a 2-core machine, which the launcher waits for), except under nsys or ncu, whose libraries gather what
they captured as the process ends. An atexit handler in the worker's process shows which ending it took."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import TINY

pytestmark = pytest.mark.e2e

# The worker as `python -m` runs it, with a handler that writes a file if the interpreter tears down.
WORKER = """
import atexit, pathlib, runpy, sys
marker = pathlib.Path(sys.argv.pop())
atexit.register(lambda: marker.write_text("torn down"))
sys.argv = ["worker", *sys.argv[1:]]
runpy.run_module("perfconsole.core.measure.worker", run_name="__main__")
"""


def _worker(spec: dict, marker) -> tuple[int, list[dict]]:
    # stdin open until the end, as the launcher holds it: a worker whose stdin closes takes its parent for gone.
    with subprocess.Popen([sys.executable, "-c", WORKER, "--spec", json.dumps(spec), str(marker)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as p:
        lines = p.stdout.read().splitlines()
        code = p.wait(timeout=300)
    return code, [json.loads(line) for line in lines]


def test_a_run_ends_once_its_events_are_out_and_a_profilers_run_ends_the_usual_way(tmp_path):
    marker = tmp_path / "torn-down"
    code, events = _worker(TINY.with_(ctx=16, warmup=0, steps=1).to_dict(), marker)
    assert code == 0 and events[-1] == {"v": 1, "type": "finished", "status": "ok"}
    assert [e["type"] for e in events].count("summary") == 1
    assert not marker.exists()                          # no teardown: os._exit once the events were flushed
    # nsys is refused on the CPU (a spec error, exit 2): the worker still ends as a profiler's must.
    code, events = _worker({**TINY.to_dict(), "profile": "nsys"}, marker)
    assert code == 2 and events[-1]["status"] == "error"
    assert marker.read_text() == "torn down"

"""The per-test plugin the run used (`PYTHONPATH=<this folder> CPUPLUG_OUT=<file> pytest -p cpuplug ...`): each test's
wall time and its process's CPU (getrusage: its own, and its reaped children's) around pytest_runtest_protocol, the
collector's passes inside it, and each worker's totals at the end of collection and of the session."""
import gc
import json
import os
import resource
import time

import pytest

_gc = [0.0, 0, 0]  # seconds in the collector, passes, full passes


def _cb(phase, info):
    if phase == "start":
        _cb.t = time.process_time()
        return
    _gc[0] += time.process_time() - _cb.t
    _gc[1] += 1
    if info.get("generation") == 2:
        _gc[2] += 1


gc.callbacks.append(_cb)
_out = os.environ.get("CPUPLUG_OUT", "/tmp/cpuplug.jsonl")


def _cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def _write(row):
    with open(_out, "a") as f:
        f.write(json.dumps(row) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    t0, (s0, c0), start, g0 = time.monotonic(), _cpu(), time.time(), list(_gc)
    yield
    s1, c1 = _cpu()
    _write({"id": item.nodeid, "start": start, "wall": time.monotonic() - t0, "self": s1 - s0, "children": c1 - c0,
            "e2e": item.get_closest_marker("e2e") is not None, "pid": os.getpid(), "gc": _gc[0] - g0[0],
            "gcn": _gc[1] - g0[1], "gc2": _gc[2] - g0[2], "frozen": gc.get_freeze_count()})


def pytest_collection_finish(session):
    s, c = _cpu()
    _write({"event": "collected", "pid": os.getpid(), "self": s, "children": c, "t": time.time()})


def pytest_sessionfinish(session):
    s, c = _cpu()
    _write({"event": "finish", "pid": os.getpid(), "self": s, "children": c, "t": time.time(),
            "worker": os.environ.get("PYTEST_XDIST_WORKER")})

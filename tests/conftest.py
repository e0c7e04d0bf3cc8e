"""Shared test set-up: GPU tests skip cleanly where there is no CUDA; files go to tmp dirs.

Every test gets its own data directory, seeded with this CPU's peaks, measured once per session: a run
in a fresh data directory measures them first, and the tests start hundreds of runs. A test marked
`fresh_data_dir` gets an empty one (the tests of the peak measurement and cache, which must measure).

The hooks at the end mark the end-to-end tests `e2e` and fail any other test that starts a worker, the CLI,
torchrun, tmux, a browser or a Slurm job (tests/tiers.py): `pytest -m "not e2e"` is the fast tier."""
from __future__ import annotations

import fcntl
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The suite runs three or four pytest-xdist workers on as few as two cores, and each starts torch processes. With
# torch's default of one intra-op thread a core, a matmul's threads wait at barriers for threads another
# process has descheduled. Set before torch is imported here, and inherited by every child a test starts.
# Only under xdist: the GPU suite runs in one process and keeps torch's own threads, as a user's run does.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from perfconsole.core.measure import gc_control  # noqa: E402

gc_control.space()  # before the test modules import torch; what they import is frozen once collected (below)

# The suite starts hundreds of Python processes (pytest-xdist's workers, each run's worker, the CLI, torchrun's ranks).
# Where the environment says PYTHONDONTWRITEBYTECODE, each of them compiled the project's modules, and each xdist
# worker rewrote every test module's asserts, from source again (about 4 of a collection's 10 CPU-s). Here the suite
# writes bytecode, into the __pycache__ folders git ignores, for this process and the ones it starts.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

import flop_seed  # noqa: E402
import tiers  # noqa: E402
from helpers import point_at_warm  # noqa: E402
from perfconsole.core.flops import PEAKS_FILE  # noqa: E402 (after the thread count)


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    for item in items:
        if tiers.is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run on the GPU machine: pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def cpu_peaks_file(tmp_path_factory) -> Iterator[Path]:
    """A data directory for the whole session, holding this CPU's peaks, measured once here (the workers'
    cache key is the same: device, thread count, torch version). Module and session fixtures run before
    any test's own directory is set: without this their runs would write into the user's.

    Under pytest-xdist the workers of one run share one measurement, taken by the first under a lock while
    the others wait: four workers measuring at once on a small machine measure each other."""
    import torch

    from perfconsole.core.measure.device_peaks import peaks_for

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    folder = (tmp_path_factory.getbasetemp().parent / f"session-data-{run}") if run else \
        tmp_path_factory.mktemp("session-data")
    folder.mkdir(exist_ok=True)
    with (folder / "measuring.lock").open("w") as lock, pytest.MonkeyPatch.context() as mp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        mp.setenv("PERFCONSOLE_DATA_DIR", str(folder))
        peaks_for(torch.device("cpu"))
        fcntl.flock(lock, fcntl.LOCK_UN)
        # The module and session fixtures then get a folder of this worker's own: a warm process one starts
        # leaves its pointer there, and a command another worker's fixture starts must not find it and fork
        # its run from it (a test_warm.py check saw such a stranger among its warm process's children).
        mp.setenv("PERFCONSOLE_DATA_DIR", str(seed_peaks(_worker_data(tmp_path_factory), folder / PEAKS_FILE)))
        yield folder / PEAKS_FILE


def _worker_data(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "worker-data"


def seed_peaks(data_dir: Path, peaks_file: Path) -> Path:
    """Put the session's measured peaks into `data_dir` (made if missing), so its runs measure nothing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(peaks_file, data_dir / PEAKS_FILE)
    return data_dir


@pytest.fixture(autouse=True)
def _data_dir(request, cpu_peaks_file, tmp_path_factory, monkeypatch):
    """Never write into the user's real data directory. An end-to-end test's starts with the FLOP counts the
    session's runs have made so far, and adds its own (tests/flop_seed.py)."""
    folder = tmp_path_factory.mktemp("data")
    seeded = request.node.get_closest_marker("fresh_data_dir") is None
    if seeded:
        seed_peaks(folder, cpu_peaks_file)
    counts = seeded and request.node.get_closest_marker("e2e") is not None
    if counts:
        flop_seed.seed(cpu_peaks_file.parent, folder)
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(folder))
    yield
    if counts:
        flop_seed.keep(cpu_peaks_file.parent, folder)


@pytest.fixture(scope="session")
def _warm_session() -> Iterator[None]:
    yield
    from perfconsole.core.launch import warm

    warm.stop_own()


@pytest.fixture(autouse=True)
def _warm_launches(request, tmp_path_factory):
    """An end-to-end test's in-process launches fork their workers from a warm process of this xdist worker's,
    as a console's launches do from its own (core.launch.warm): about 0.5 CPU-s a run against about 4 for a cold
    worker's imports, some hundred runs in the suite. Started at the first such test (a test that stops it, as
    test_warm.py's do, has the next start another), ended with the session. The test's data folder names it, so the CLI's
    runs fork from it too, and so do torchrun and its ranks (core.launch.warm_rank); Slurm's tasks, tests
    on another or a fresh folder and tests run with PERFCONSOLE_WARM=off stay cold, as a user's do without a
    console: both paths stay tested (docs/development.md). Not for the `gpu`
    tests: they run on the GPU machine, where CPU time is no concern, on the cold path their evidence was taken on."""
    if request.node.get_closest_marker("e2e") is None or request.node.get_closest_marker("gpu") is not None:
        return
    own = _worker_warm(request, tmp_path_factory)
    if own is not None and request.node.get_closest_marker("fresh_data_dir") is None:
        # The test's data folder names it too, as a console up beside the test's commands would: a CLI the test
        # starts on this folder forks its runs from it. A test that sets another folder, turns the warm path off,
        # or starts on a fresh one (a new user's first run) starts its CLI's runs cold.
        point_at_warm()


def _worker_warm(request, tmp_path_factory):
    """This xdist worker's warm process, started if none is up."""
    from perfconsole.core.launch import warm

    request.getfixturevalue("_warm_session")
    with pytest.MonkeyPatch.context() as mp:  # its own pointer goes to the worker's folder, not a test's
        mp.setenv("PERFCONSOLE_DATA_DIR", str(_worker_data(tmp_path_factory)))
        return warm.start_own()


@pytest.fixture(scope="module", autouse=True)
def _warm_module(request, tmp_path_factory):
    """The module fixtures of a file of end-to-end tests (test_profiled.py's runs, test_cli.py's commands) run
    before any of its tests' `_warm_launches`: the worker's warm process is up before them too, so their runs fork
    (cold, test_profiled.py's three workers took about 15 CPU-s where the file was the worker's first e2e one)."""
    def needs(item) -> bool:
        return item.get_closest_marker("e2e") is not None and item.get_closest_marker("gpu") is None

    if any(needs(item) for item in request.session.items if item.path == request.path):
        # Started for the file's e2e tests, whichever of its tests comes first: not that test's own start (the fast
        # tier never gets here, its collection holds no e2e test).
        held, tiers.running[0] = tiers.running[0], None
        try:
            _worker_warm(request, tmp_path_factory)
        finally:
            tiers.running[0] = held


# The two tiers: which tests are e2e, and the guard on the others (tests/tiers.py).
def pytest_configure(config):
    tiers.install_guard()
    # `--dist loadfile` hands the files out in the collection's order, not xdist's own by number of tests, which
    # started the one-test chaos files last and ended the suite on one busy worker. The longest files first, tried at
    # 4ff62d0, was no faster: 484.03 s against 440.44 to 478.50 s in three runs of this order (test_suite_time.md).
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist's; the GPU machine's pytest may run without it
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """An xdist worker's syrupy (the snapshot tests' plugin) is done once its own sessionfinish has run: it checks no
    unused snapshots in a worker, and a worker's terminal summary is shown to nobody. Yet syrupy 4.8's summary then
    matched every snapshot against every collected test, 2 to 3 CPU-s a worker, all of them at once at the end of the
    run. Fixed in syrupy 5 (syrupy-project/syrupy#978), which pytest-textual-snapshot 1.1.0 does not allow; this is
    its own later fix (Textualize/pytest-textual-snapshot#20)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    plugin = session.config.pluginmanager.get_plugin("syrupy")
    if plugin is not None:
        session.config.pluginmanager.unregister(plugin)
    # The worker's tests are done, and what they left is freed with the process. pytest's last act would be five full
    # passes of the collector over it, to print an error a finaliser raised then as a warning tied to no test: 0.8 to
    # 2.5 CPU-s a worker, on the run's critical path, where the controller waits for every worker to exit (and
    # execnet, tired of waiting, interrupted some, which printed a KeyboardInterrupt raised inside those passes).
    gc_control.settle()


def pytest_collection_finish(session):
    """What is imported and collected by now lives as long as the session: out of the collector's sight, as
    in the console's own process (core/measure/gc_control.py)."""
    gc_control.settle()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    tiers.guard_warm()
    tiers.running[0] = item
    try:
        return (yield)
    finally:
        tiers.running[0] = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test whose forbidden start was raised in another thread (a console's launch) fails all the same."""
    report = yield
    message = tiers.started.pop(item.nodeid, None)
    if message and report.passed:
        report.outcome, report.longrepr = "failed", message
    return report

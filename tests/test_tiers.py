"""The two tiers (tests/tiers.py): which argv only an e2e test may start, which test code counts as e2e, and
the guard that fails an unmarked test starting one. Nothing here starts such a process."""
from __future__ import annotations

import subprocess
import sys
import threading

import pytest
import tiers
from helpers import PC, pc

PY = sys.executable


@pytest.mark.parametrize("argv, what", [
    ([PY, "-m", "perfconsole.core.measure.worker", "--spec", "{}"], "a worker"),
    ([PY, "-m", "torch.distributed.run", "--standalone", "x.py"], "torchrun"),
    (["/usr/bin/torchrun", "--nproc-per-node", "2"], "torchrun"),
    ([PY, "-m", "perfconsole.tui.main", "run"], "the perfconsole CLI"),
    (["/work/.venv/bin/perfconsole", "--help"], "the perfconsole CLI"),
    ([PY, "-m", "perfconsole.core.launch.warm_server", "--socket", "s"], "a warm process"),
    ([PY, "-m", "perfconsole.somewhere_new"], "a perfconsole process (perfconsole.somewhere_new)"),
    (["nsys", "profile", "-o", "x", PY, "-m", "perfconsole.core.measure.worker"], "a worker"),
    (["tmux", "-S", "sock", "new-session"], "tmux"),
    ("tmux -S sock kill-server", "tmux"),
    (["sh", "-c", "sbatch job.sh"], "a Slurm job"),
    (["srun", "hostname"], "a Slurm job"),
    (["/usr/bin/chromium", "--headless"], "a browser"),
    (["/x/playwright/driver/node", "/x/playwright/driver/package/cli.js", "run-driver"],
     "a browser (playwright's driver)"),
    ([PY, "-c", "from multiprocessing.forkserver import main; main(3, 4, ['torch'])"],
     "a multiprocessing process (forkserver or spawn)"),
    ([PY, "-m", "pytest", "-m", "gpu", "--collect-only"], "a pytest run"),
    ([PY, "-c", "import torch.distributed as d; d.init_process_group('gloo')", "store"], "a torch.distributed rank"),
    ([PY, "-c", "import perfconsole.core.settings"], None),
    ([PY, "-m", "pip", "install", "/tmp/perfconsole"], None),
    (["git", "-C", "/work/perfconsole", "status"], None),
    (["nsys", "--version"], None),
])
def test_what_only_an_e2e_test_may_start(argv, what):
    assert tiers.e2e_process(argv) == what


def _starts_the_cli():
    return pc("--help")


def _starts_tmux():
    return subprocess.run(["tmux", "-V"])


def _through_a_helper():
    return _starts_the_cli()


def _starts_nothing():
    return subprocess.run([PY, "-c", "pass"])


@pytest.mark.parametrize("fn, e2e", [(_starts_the_cli, True), (_starts_tmux, True), (_through_a_helper, True),
                                     (_starts_nothing, False), (lambda: [*PC, "--help"], True)])
def test_test_code_that_reaches_a_process_starter_is_e2e(fn, e2e):
    assert tiers.reaches_e2e(fn.__code__, fn.__globals__, fn.__module__, set()) is e2e


def test_the_helpers_imported_as_tests_helpers_count_too():
    """A test file may import the helpers as `tests.helpers` (another module object than `helpers`)."""
    import importlib

    spelled = importlib.import_module("tests.helpers")
    assert spelled is not sys.modules["helpers"]
    for code in ("def f():\n    return pc('--help')\n", "def f():\n    return [*PC, 'run']\n"):
        namespace = {name: vars(spelled)[name] for name in ("pc", "PC")}  # no `pc` in this test's own code
        exec(compile(code, "<test file>", "exec"), namespace)
        assert tiers.reaches_e2e(namespace["f"].__code__, namespace, "tests.core.x", set()), code


def _worker_argv() -> list[str]:
    # Built at run time: as a constant the collection rule would mark this test e2e, and the guard would let it by.
    return [PY, "-m", ".".join(["perfconsole", "core", "measure", "worker"]), "--help"]


def test_an_unmarked_test_that_starts_a_worker_fails_and_says_to_mark_it(request):
    assert request.node.get_closest_marker("e2e") is None
    with pytest.raises(pytest.fail.Exception) as failed:
        subprocess.Popen(_worker_argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    message = str(failed.value)
    assert request.node.nodeid in message and "starts a worker" in message and "@pytest.mark.e2e" in message
    assert tiers.started.pop(request.node.nodeid) == message   # else this test's report would fail


def test_a_start_from_another_thread_fails_the_test_too(request):
    """A console launches from a worker thread: the exception stays there, so the report carries it."""
    raised: list[BaseException] = []

    def launch() -> None:
        try:
            subprocess.run(_worker_argv(), capture_output=True)
        except BaseException as exc:  # noqa: B036 (pytest.fail's exception is a BaseException)
            raised.append(exc)

    thread = threading.Thread(target=launch)
    thread.start()
    thread.join(30)
    message = tiers.started.pop(request.node.nodeid, None)
    assert message is not None and "starts a worker" in message and raised


def test_a_cheap_child_is_not_stopped():
    done = subprocess.run([PY, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "42"

"""The suite's own file order (tests/file_order.py): under the README's command each worker collects the longest files
first, and whether files are handed out whole reaches the worker, whose own `--dist` reads `no`."""
from __future__ import annotations

from types import SimpleNamespace

import file_order
import pytest


def _handed_out_whole(argv: list[str]) -> bool:
    """Read from the controller's own command line, as a second opinion beside the worker's input."""
    pairs = zip(argv, argv[1:])
    return any(a in ("--dist=loadfile", "--dist=loadscope") for a in argv) or \
        any(a == "--dist" and b in file_order.WHOLE_FILES for a, b in pairs)


def test_a_worker_of_a_loadfile_run_collects_the_longest_files_first(request):
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None or not _handed_out_whole(list(workerinput.get("mainargv", []))):
        pytest.skip("a pytest-xdist worker of a --dist loadfile run (the README's command) checks this")
    assert file_order.whole_files(request.config)
    order = list(dict.fromkeys(file_order.file_of(item) for item in request.session.items))
    listed = [f for f in order if f in file_order.SECONDS]
    if not listed:
        pytest.skip("no file of tests/file_seconds.json in this run")
    assert order[:len(listed)] == listed  # every listed file before any other
    assert [file_order.SECONDS[f] for f in listed] == sorted((file_order.SECONDS[f] for f in listed), reverse=True)


def test_the_worker_reads_its_input_and_a_single_process_its_option():
    worker = SimpleNamespace(workerinput={"whole_files": True}, option=SimpleNamespace(dist="no"))
    assert file_order.whole_files(worker)
    assert not file_order.whole_files(SimpleNamespace(workerinput={}, option=SimpleNamespace(dist="no")))
    assert file_order.whole_files(SimpleNamespace(option=SimpleNamespace(dist="loadfile")))
    assert not file_order.whole_files(SimpleNamespace(option=SimpleNamespace(dist="load")))
    assert not file_order.whole_files(SimpleNamespace(option=SimpleNamespace()))
    node = SimpleNamespace(workerinput={}, config=SimpleNamespace(getvalue={"dist": "loadfile"}.get))
    file_order.configure_node(node)
    assert node.workerinput == {"whole_files": True}

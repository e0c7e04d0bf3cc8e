"""A job whose rank died by a signal leaves no error file (it raised nothing): the run's error names the rank and
the signal from torchrun's own summary, not its last line (a banner of '='). The tail is real: 64 gloo ranks on a
23 GiB machine, one killed by the kernel's out-of-memory killer (tests/fixtures/torchrun/SOURCE.txt)."""
from __future__ import annotations

from helpers import FIXTURES

from perfconsole.core import events as ev
from perfconsole.core.launch.torchrun import failure_events, root_cause

TAIL = (FIXTURES / "torchrun" / "sigkill_root_cause_tail.txt").read_text(encoding="utf-8").splitlines()


def test_the_root_cause_rank_and_its_signal_are_the_error(tmp_path):
    assert TAIL[-1].startswith("=====")   # what the error said before: torchrun's banner
    error, finished = list(failure_events(tmp_path, 1, TAIL))
    assert isinstance(error, ev.Error) and isinstance(finished, ev.Finished) and finished.status == "error"
    assert error.message.startswith("torchrun exited with code 1 before the job finished: rank 3 was killed by "
                                    "SIGKILL (sent from outside: the kernel's out-of-memory killer"), error.message
    assert "=====" not in error.message and error.detail == "\n".join(TAIL)


def test_a_rank_that_exited_with_a_code_and_a_tail_without_the_summary():
    exited = [line.replace("exitcode  : -9 (pid: 29361)  (SIGKILL)", "exitcode  : 3 (pid: 29361)") for line in TAIL]
    assert root_cause(exited) == "rank 3 exited with code 3"
    assert root_cause(TAIL[:TAIL.index("Root Cause (first observed failure):")]) is None


def test_without_the_summary_the_last_words_that_are_not_a_banner(tmp_path):
    lines = ["Traceback (most recent call last):", "RuntimeError: rendezvous timed out", "=" * 55, ""]
    error, _ = list(failure_events(tmp_path, 1, lines))
    assert error.message == "torchrun exited with code 1 before the job finished: RuntimeError: rendezvous timed out"

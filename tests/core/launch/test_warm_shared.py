"""The warm process `perfconsole serve` shares with its tabs' consoles (core.launch.warm.SHARED_VAR): a console
of a tab looks there first, and when that warm process is gone or the value is not ours, its runs start cold
at once with the reason, instead of waiting for a socket that will not come."""
from __future__ import annotations

import os
import time

import pytest

from perfconsole.core.launch import warm


@pytest.fixture(autouse=True)
def no_own(monkeypatch):
    monkeypatch.setattr(warm, "_own", None)  # a console's own comes first: here, as in a tab's console, there is none


@pytest.fixture
def private(tmp_path):
    folder = tmp_path / "perfconsole-warm-x"
    folder.mkdir(mode=0o700)
    return folder


def test_a_shared_warm_process_that_has_ended_sends_the_run_cold_at_once(monkeypatch, private):
    monkeypatch.setenv(warm.SHARED_VAR, f"{2 ** 22 + 12345}:{private / 'socket'}")  # past pid_max's default
    started = time.monotonic()
    assert warm.find() == ([], "the server's warm process has ended")
    assert time.monotonic() - started < 5


def test_a_shared_socket_found_is_the_only_one_tried(monkeypatch, private):
    (private / "socket").touch()
    monkeypatch.setenv(warm.SHARED_VAR, f"{os.getpid()}:{private / 'socket'}")
    assert warm.find() == ([private / "socket"], "")


@pytest.mark.parametrize("value", ["socket", "12:/tmp", "x:/tmp/a/socket"])
def test_a_value_that_names_no_private_folder_of_ours_is_refused(monkeypatch, tmp_path, value):
    monkeypatch.setenv(warm.SHARED_VAR, value)
    assert warm.find() == ([], f"{warm.SHARED_VAR} names no warm process of this user's")

"""A forked worker's handle (core.launch.warm.WarmProc) as two threads use it at once: the launcher waiting for
the exit while another thread polls. The status arrives once, on the warm process's socket; whichever thread
reads it, the waiting one must see it (a wait taken whole once hung a console's ladder test on a clean clone)."""
from __future__ import annotations

import json
import os
import select
import socket
import threading

from perfconsole.core.launch import warm


def test_a_wait_sees_the_exit_another_thread_read_while_it_was_about_to_wait(monkeypatch):
    ours, theirs = socket.socketpair()
    proc = warm.WarmProc(os.getpid(), ours, None)
    real_select = select.select
    calls = []

    def another_thread_polls_first(r, w, x, timeout=None):
        # The interleaving that hung: after the waiting thread's look, the status came and a poll took it before
        # the waiting thread's select began.
        if not calls:
            calls.append(timeout)
            theirs.sendall(json.dumps({"exit": 3}).encode())
            assert proc.poll() == 3
        return real_select(r, w, x, timeout)

    monkeypatch.setattr(warm.select, "select", another_thread_polls_first)
    got = []
    waiter = threading.Thread(target=lambda: got.append(proc.wait()), daemon=True)
    waiter.start()
    waiter.join(timeout=5)
    assert not waiter.is_alive(), "wait() still blocked after another thread read the exit status"
    assert got == [3] and calls
    theirs.close()
    proc.release()


def test_wait_with_a_timeout_gives_up_in_time_and_poll_never_waits():
    ours, theirs = socket.socketpair()
    proc = warm.WarmProc(os.getpid(), ours, None)
    assert proc.poll() is None
    try:
        proc.wait(timeout=0.3)
    except warm.subprocess.TimeoutExpired:
        pass
    else:
        raise AssertionError("wait(0.3) returned without a status")
    theirs.sendall(json.dumps({"exit": -9}).encode())
    assert proc.wait(timeout=2) == -9 and proc.poll() == -9
    theirs.close()
    proc.release()

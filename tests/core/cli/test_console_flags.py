"""The console's pre-fill flags follow one rule with every command's: a bad value is one line on stderr
naming the flag and what it allows, exit 2, before the console starts; never a console opened with the
form quietly back at its default and a toast that fades."""
from __future__ import annotations

import os
import pty
import subprocess

import pytest
from helpers import PC

pytestmark = pytest.mark.e2e   # every test here starts the perfconsole CLI (tests/tiers.py)


def console_in_a_terminal(*args: str) -> subprocess.CompletedProcess:
    """`perfconsole ARGS` with a terminal for its keys and screen (stdin, stdout), its stderr captured apart:
    where the flags pass, the console opens there (and is ended by the timeout, failing the test)."""
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen([*PC, *args], stdin=child, stdout=child, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        os.close(child)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    finally:
        os.close(main)


@pytest.mark.parametrize("flags, line", [
    (["--size", "huge"], "perfconsole: error: size: must be one of tiny, small, medium, large, xl, 2.7B, custom"),
    (["--ctx", "0"], "perfconsole: error: ctx: must be from 1 to 1048576, not 0"),
    # The launch form's words for the same text (argparse's own were "invalid int value: 'abc'").
    (["--ctx", "abc"], "perfconsole: error: argument --ctx: must be an integer, not 'abc'"),
])
def test_a_bad_pre_fill_flag_is_one_line_and_exit_2_before_the_console_starts(flags, line):
    out = console_in_a_terminal("--device", "cpu", *flags)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "\x1b" not in out.stderr          # the console never drew
    assert len(out.stderr.splitlines()) == 1, out.stderr[-2000:]
    assert out.stderr.strip().startswith(line), out.stderr

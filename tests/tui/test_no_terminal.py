"""`perfconsole | cat`: with no terminal the console refuses in one line instead of hanging."""
from __future__ import annotations

import subprocess
import sys


def test_the_console_without_a_terminal_is_one_line_and_exit_2():
    out = subprocess.run([sys.executable, "-m", "perfconsole.tui.main", "--size", "tiny", "--device", "cpu"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert out.stdout == "" and "\x1b" not in out.stderr
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert "the console needs a terminal" in out.stderr and "perfconsole serve" in out.stderr

"""ASCII is chosen for a C/POSIX or non-UTF-8 locale, whatever Python does to its own stdout."""
from __future__ import annotations

import subprocess
import sys

import pytest

from perfconsole.tui.glyphs import terminal_supports_unicode


@pytest.mark.parametrize("env, unicode", [
    ({"LANG": "C", "LC_ALL": "C"}, False),
    ({"LANG": "C", "LC_CTYPE": "C.UTF-8"}, False),           # what PEP 538 leaves behind for LANG=C
    ({"LANG": "POSIX"}, False),
    ({"LANG": "en_US.ISO-8859-1"}, False),
    ({"LANG": "C.UTF-8"}, True),
    ({"LANG": "C", "LC_ALL": "en_US.UTF-8"}, True),
    ({"LC_CTYPE": "de_DE.utf8", "LANG": "C"}, True),
])
def test_the_locale_decides(env, unicode):
    assert terminal_supports_unicode(env) is unicode


def test_a_real_process_under_lang_c_chooses_ascii():
    code = "from perfconsole.tui import glyphs; print(glyphs.choose(False) is glyphs.ASCII)"
    for env in ({"LANG": "C", "LC_ALL": "C"}, {"LANG": "C"}):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, "PATH": "/usr/bin"})
        assert out.stdout.strip() == "True", (env, out.stderr)

"""What `perfconsole run` imports before its worker starts: its own command's modules, not every command's
(pandas and pyarrow, for the profile readers, cost a run about 0.7 s on a 2-core machine before its first step)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from perfconsole.core.cli.main import COMMAND_MODULES, COMMANDS, build_parser

PROBE = """
import sys
from perfconsole.tui.main import cli
parser = cli.build_parser(None, "run")
args = parser.parse_args(["run", "--size", "tiny", "--device", "cpu"])
print(args.command, *sorted(m for m in ("pandas", "pyarrow", "numpy", "textual", "torch") if m in sys.modules))
"""


def test_a_run_command_line_imports_no_table_or_torch_library_before_its_worker():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["run"]


@pytest.mark.parametrize("name", sorted(COMMAND_MODULES))
def test_each_command_name_builds_that_commands_own_parser(name):
    assert sorted(COMMAND_MODULES.values()) == sorted(COMMANDS)
    sub = build_parser(only=name)._subparsers._group_actions[0]
    assert list(sub.choices) == [name]
    whole = build_parser()._subparsers._group_actions[0]
    assert sub.choices[name].format_help() == whole.choices[name].format_help()

"""docs/gate.md's CI jobs are the files under docs/examples/ci, word for word, and each file is YAML whose
`perfconsole gate` command line the gate's own parser takes, thresholds and budget included."""
from __future__ import annotations

import re
import shlex

import pytest
import yaml
from helpers import ROOT

from perfconsole.core.cli.gate import settings_from_args
from perfconsole.core.cli.main import build_parser

CI = ROOT / "docs" / "examples" / "ci"
FILES = sorted(CI.glob("*.yml"))


def commands(node) -> list[str]:
    """Every shell line in a loaded YAML document that runs `perfconsole gate`."""
    if isinstance(node, dict):
        return [c for v in node.values() for c in commands(v)]
    if isinstance(node, list):
        return [c for v in node for c in commands(v)]
    return [node] if isinstance(node, str) and node.lstrip().startswith("perfconsole gate") else []


def test_there_is_a_github_and_a_gitlab_job():
    assert [f.name for f in FILES] == ["github-actions.yml", "gitlab-ci.yml"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_job_parses_and_its_gate_command_is_one_the_parser_takes(path):
    doc = yaml.safe_load(path.read_text())
    found = commands(doc)
    assert len(found) == 1, found
    # The CI's own expressions (`${{ github.base_ref }}`) become a word; the shell's variables stay as they are.
    argv = shlex.split(re.sub(r"\$\{\{[^}]*\}\}", "main", found[0]))
    assert argv[:2] == ["perfconsole", "gate"]
    args = build_parser(only="gate").parse_args(argv[1:])
    settings = settings_from_args(args)
    assert len(args.rev) == 2 and args.model.endswith(":build") and args.junit == "gate.xml"
    assert settings.threshold.relative and not settings.memory_threshold.relative and settings.budget.seconds == 600


def test_the_docs_show_the_files_word_for_word():
    text = (ROOT / "docs" / "gate.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    assert sorted(blocks) == sorted(f.read_text() for f in FILES)
    for f in FILES:
        assert f"docs/examples/ci/{f.name}" in text

"""The console's session state (its runs, their files, the marks, the current run, the grids and the saved
comparisons listed, the grid and comparison shown) is written only through tui/session.py's Session: no app module assigns, subscripts or
mutates those fields itself, on the app or on the session."""
from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from helpers import ROOT

TUI = ROOT / "tui"
# The state's names, today's and the ones it had as the app's fields (sources and _kept: "this run has a file").
FIELDS = {"runs", "marked", "sources", "_kept", "files", "_files", "current", "grids", "comparisons",
          "grid", "comparison", "shown_grid", "compared",
          "_runs", "_marked", "_current", "_grids", "_comparisons", "_shown_grid", "_compared"}
MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "update", "add", "discard", "setdefault",
            "sort", "reverse", "popitem", "__setitem__", "__delitem__"}
OWNERS = {"self", "app", "session"}   # the app (its mixins' self), or its session however it is reached


def _owned(node: ast.AST) -> bool:
    """`self`, `app`, `session`, or anything's `.session` / `.app`: where the console keeps its state."""
    if isinstance(node, ast.Name):
        return node.id in OWNERS
    return isinstance(node, ast.Attribute) and node.attr in ("session", "app")


def _field(node: ast.AST) -> str | None:
    """The state field a target names (`self.runs`, `self.sources[k]`, `self.session.runs`), else None."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr in FIELDS and _owned(node.value):
        return node.attr
    return None


def writes(folder: Path) -> list[tuple[str, int, str]]:
    """(module, line, field) for every write of the state outside session.py in `folder`'s modules."""
    found = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "session.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in MUTATORS):
                targets = [node.func.value]
            for target in targets:
                name = _field(target)
                if name is not None:
                    found.append((path.name, node.lineno, name))
    return sorted(found)


def test_the_scan_sees_each_kind_of_write(tmp_path):
    (tmp_path / "mixin.py").write_text(
        "class M:\n"
        "    def f(self, app, r):\n"
        "        self.runs.append(r)\n"
        "        self.sources[r.id] = 'p'\n"
        "        self.current = r\n"
        "        self.active = self.current = r\n"
        "        app.session.marked.remove(r.id)\n"
        "        self._kept.update(['x'])\n"
        "        del self.session.files[r.id]\n"
        "        self.grids += [r]\n"
        "        grid.runs[0] = r\n"            # a grid's own cells: not the session's
        "        self.session.add(r)\n"         # through the session: fine
        "        print(self.runs[0], len(self.marked))\n")
    (tmp_path / "session.py").write_text("class Session:\n    def add(self, r):\n        self._runs.append(r)\n")
    assert [(line, name) for _, line, name in writes(tmp_path)] == [
        (3, "runs"), (4, "sources"), (5, "current"), (6, "current"), (7, "marked"), (8, "_kept"), (9, "files"),
        (10, "grids")]


def test_the_consoles_modules_write_the_session_only_through_its_methods():
    found = writes(TUI)
    by_module = Counter(module for module, _, _ in found)
    assert not found, f"state written outside Session: {dict(by_module)}; first: {found[:8]}"

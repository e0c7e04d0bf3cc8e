"""The plan of the house, enforced. The layers point one way: tui -> core -> model; core and model
never import textual or tui; model never imports core. Inside core/, each part may import only the
parts before it in PARTS (the way import-linter's layers contract reads), and no modules anywhere
import each other in a circle. Imports inside functions count: a late import is still a dependency."""
import ast
import pathlib
import re
import subprocess
import sys

import pytest
from helpers import ROOT


# core/'s parts, lowest first. "" is the shared vocabulary: the modules at core/'s top, and the run's settings,
# a package of its own (its declarations, the machinery that reads them and its rules) but one word of it.
PARTS = ("", "profiling", "timeline", "telemetry", "measure", "launch", "grids", "gate", "reports", "cli")
VOCABULARY_PACKAGES = ("settings",)
# A string that names a module ("perfconsole.core.measure.checkpointing:apply", for importlib to load) is a
# dependency as an import is, one no import statement shows. In the settings' declarations, which every part reads,
# such a link obeys the layers' rule too.
LINK = re.compile(r"^perfconsole(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?$")
LINKING = ("core/settings",)


def imports_of(folder: str, root: pathlib.Path = ROOT) -> set[tuple[str, str]]:
    """(file, imported module) for every import under `folder`, relative imports resolved."""
    found = set()
    for path in (root / folder).rglob("*.py"):
        rel = path.relative_to(root).with_suffix("")
        package = list(rel.parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package[: len(package) - (node.level - 1)]
                    base = "perfconsole." + ".".join(anchor + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            found.update((str(path.relative_to(root)), n) for n in names)
    return found


def links_of(folder: str, root: pathlib.Path = ROOT) -> set[tuple[str, str]]:
    """(file, module) for every string under `folder` that names a perfconsole module, `module:attribute` or
    `module` alone."""
    found = set()
    for path in (root / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and LINK.match(node.value):
                found.add((str(path.relative_to(root)), node.value.partition(":")[0]))
    return found


def part_of(module: str) -> str | None:
    """The part of core/ a dotted name belongs to ("" for the vocabulary), or None outside core."""
    parts = module.split(".")
    if parts[:2] != ["perfconsole", "core"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in PARTS else ""


def layer_violations(root: pathlib.Path = ROOT) -> list[str]:
    bad = []
    linked = {(f, n, "names") for folder in LINKING if (root / folder).exists() for f, n in links_of(folder, root)}
    for file, name, how in {(f, n, "imports") for f, n in imports_of("core", root)} | linked:
        here = part_of("perfconsole." + file.removesuffix(".py").replace("/", "."))
        there = part_of(name)
        if here is None or there is None or there == here:
            continue
        if PARTS.index(there) > PARTS.index(here):
            bad.append(f"{file} {how} {name}: core.{here or '<vocabulary>'} may not import core.{there}")
    return sorted(bad)


def circles(root: pathlib.Path = ROOT) -> list[list[str]]:
    """Strongly connected groups of modules (size > 1) in the import graph of core, tui and model."""
    modules = {}
    for pkg in ("core", "tui", "model"):
        for f in (root / pkg).rglob("*.py"):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules["perfconsole." + ".".join(parts)] = str(f.relative_to(root))
    by_file = {v: k for k, v in modules.items()}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for pkg in ("core", "tui", "model"):
        for file, name in imports_of(pkg, root):
            src = by_file[file]
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != src and not src.startswith(name + "."):
                graph[src].add(name)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_core_parts_import_only_earlier_parts():
    assert layer_violations() == []


def test_no_import_circles():
    assert circles() == []


def test_every_core_part_is_a_listed_package_with_its_rules():
    folders = sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").exists()
                     and p.name not in VOCABULARY_PACKAGES)
    assert folders == sorted(p for p in PARTS if p)
    for part in folders:
        doc = ast.get_docstring(ast.parse((ROOT / "core" / part / "__init__.py").read_text()))
        assert doc and "may import" in doc.lower(), part


def test_the_vocabulary_stays_small():
    loose = sorted([p.name for p in (ROOT / "core").glob("*.py") if p.name != "__init__.py"]
                   + [f"{name}/" for name in VOCABULARY_PACKAGES])
    assert len(loose) <= 8, loose


@pytest.fixture
def fake_tree(tmp_path):
    for d in ("core/grids", "core/reports", "tui", "model"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "__init__.py").write_text("")
    return tmp_path


def test_the_checks_catch_an_upward_import_and_a_circle(fake_tree):
    (fake_tree / "core/grids/sweep.py").write_text("def f():\n    from perfconsole.core.reports import sweep\n")
    (fake_tree / "core/reports/sweep.py").write_text("from perfconsole.core.grids.sweep import f\n")
    assert layer_violations(fake_tree) == [
        "core/grids/sweep.py imports perfconsole.core.reports.sweep: core.grids may not import core.reports",
        "core/grids/sweep.py imports perfconsole.core.reports: core.grids may not import core.reports"]
    assert circles(fake_tree) == [["perfconsole.core.grids.sweep", "perfconsole.core.reports.sweep"]]


def test_a_string_in_the_spec_that_names_a_module_above_it_is_caught(tmp_path):
    """An optimization's code named by the spec as "module:function" (how the settings package once named
    core.measure.checkpointing) is an upward link no import statement shows."""
    for d in ("core/settings", "core/measure"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "__init__.py").write_text("")
    (tmp_path / "core/measure/checkpointing.py").write_text("def apply(value, model):\n    return model\n")
    (tmp_path / "core/settings/__init__.py").write_text(
        'CHECKPOINT = dict(default="none", apply="perfconsole.core.measure.checkpointing:apply")\n'
        '"""perfconsole.core.measure is named in prose here, which links nothing."""\n')
    assert layer_violations(tmp_path) == [
        "core/settings/__init__.py names perfconsole.core.measure.checkpointing: core.<vocabulary> may not import "
        "core.measure"]


def test_core_never_imports_textual_or_tui():
    bad = [(f, n) for f, n in imports_of("core") if n.split(".")[0] == "textual" or n.startswith("perfconsole.tui")]
    assert bad == []


def test_model_imports_only_torch_and_itself():
    bad = [(f, n) for f, n in imports_of("model")
           if n.startswith(("perfconsole.core", "perfconsole.tui", "textual", "rich", "pandas"))]
    assert bad == []


def test_importing_core_cli_and_specs_does_not_load_torch_or_textual():
    code = ("import sys, perfconsole.core.cli.main, perfconsole.core.record, perfconsole.core.store, "
            "perfconsole.core.reports.export, perfconsole.core.launch.launcher; "
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""The layers point one way: tui -> core -> model. core and model never import textual or tui;
model never imports core."""
import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def imports_of(folder: str) -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found.update((str(path.relative_to(ROOT)), n) for n in names)
    return found


def test_core_never_imports_textual_or_tui():
    bad = [(f, n) for f, n in imports_of("core") if n.split(".")[0] == "textual" or n.startswith("perfconsole.tui")]
    assert bad == []


def test_model_imports_only_torch_and_itself():
    bad = [(f, n) for f, n in imports_of("model")
           if n.startswith(("perfconsole.core", "perfconsole.tui", "textual", "rich", "pandas"))]
    assert bad == []


def test_importing_core_cli_and_specs_does_not_load_torch_or_textual():
    code = ("import sys, perfconsole.core.cli, perfconsole.core.record, perfconsole.core.store, "
            "perfconsole.core.export, perfconsole.core.launcher; "
            "print(sorted(m for m in ('torch', 'textual') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

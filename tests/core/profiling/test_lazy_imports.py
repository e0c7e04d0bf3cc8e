"""A console, and the commands that start runs, start without pandas, numpy or pyarrow
(core/profiling/lazy_imports.py): about 0.85 CPU-s of imports that only a profile's tables need. Each check runs
in a fresh interpreter: this one has imported them already."""
from __future__ import annotations

import subprocess
import sys
import textwrap

HEAVY = ("pandas", "numpy", "pyarrow")


def _loaded(code: str) -> list[str]:
    probe = code + f"\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_the_console_and_the_run_commands_import_no_table_library():
    assert _loaded("import perfconsole.tui.app, perfconsole.tui.main, perfconsole.core.cli.run") == []


def test_help_builds_every_command_s_parser_without_a_table_library():
    """`perfconsole --help` builds every sub-command's parser, `import` and `export` among them (pandas took 0.6 of
    its 1.2 CPU-s)."""
    code = textwrap.dedent("""
        import contextlib, io
        from perfconsole.tui.main import main
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
            main(["--help"])
        assert "import" in out.getvalue() and "export" in out.getvalue(), out.getvalue()
    """)
    assert _loaded(code) == []


def test_a_console_that_opens_and_shows_each_tab_without_a_profile_imports_none():
    code = textwrap.dedent("""
        import asyncio
        from perfconsole.tui.app import PerfConsole

        async def main():
            async with PerfConsole().run_test(size=(120, 40)) as pilot:
                for key in "23451":
                    await pilot.press(key)
                    await pilot.pause(0.05)

        asyncio.run(main())
    """)
    assert _loaded(code) == []


def test_the_lazy_module_is_the_module_once_asked():
    from perfconsole.core.profiling.lazy_imports import LazyModule

    json = LazyModule("json")
    assert "loaded on first use" in repr(json)
    assert json.dumps([1]) == "[1]" and "loaded>" in repr(json)

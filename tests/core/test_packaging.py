"""Install the project (a real, non-editable wheel build) into a fresh venv and run the command.

The venv sees the test environment's packages through a .pth file (torch, textual, ...) so nothing is downloaded; the
project itself is built and installed for real, and must land under one `perfconsole` namespace.
"""
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import venv

import pytest
from helpers import ROOT

pytestmark = pytest.mark.e2e   # every test here starts a process (tests/tiers.py)



@pytest.mark.slow
def test_fresh_install_has_the_command_and_no_bare_packages(tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = pathlib.Path(subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    # Dependencies come from the test environment (appended to sys.path, so the install wins): every site
    # directory it has, since a venv may take packages (setuptools' wheel command among them) from another
    # venv's site-packages through a .pth line, which the fresh venv would not follow.
    sites = [sysconfig.get_paths()["purelib"]]
    sites += [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and p not in sites]
    (site / "zz_test_env.pth").write_text("".join(f"{p}\n" for p in sites))
    # Build from a copy: an in-tree build/ would outlive renamed files and could ship them later.
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", ".device", "build", "*.egg-info",
                                                             "__pycache__", ".pytest_cache", "docs"))
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(src)],
                   check=True, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    for bare in ("core", "model", "tui"):
        assert not (site / bare).exists(), f"installed a bare {bare!r} package"
        assert (site / "perfconsole" / bare / "__init__.py").exists()
        # every package of the checkout is installed (pyproject lists them by name: a new one is easily left out)
        for init in (ROOT / bare).rglob("__init__.py"):
            assert (site / "perfconsole" / init.relative_to(ROOT)).exists(), f"not installed: {init.parent}"
    assert (site / "perfconsole" / "tui" / "app.tcss").exists() or not (ROOT / "tui" / "app.tcss").exists()
    out = subprocess.run([env_dir / "bin" / "perfconsole", "--help"], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "run" in out.stdout and "export" in out.stdout
    # The installed copy, not the checkout, answers.
    where = subprocess.run([py, "-c", "import perfconsole.core.settings as s; print(s.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert where.startswith(str(site))

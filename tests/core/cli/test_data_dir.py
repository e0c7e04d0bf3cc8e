"""A data directory that cannot be one (PERFCONSOLE_DATA_DIR naming a file): the console, serve and every
command that keeps files there refuse in one line, exit 2, before any work; and a console that fails
once it is up exits non-zero, with its traceback."""
from __future__ import annotations

import os
import pty
import subprocess

import pytest
from helpers import PC, TINY_ARGS, pc

pytestmark = pytest.mark.e2e   # every test here starts the perfconsole CLI (tests/tiers.py)

STEPS = ["--warmup", "1", "--steps", "2"]
COMMANDS = {
    "console": TINY_ARGS,
    "run": ["run", *TINY_ARGS, *STEPS],
    "sweep": ["sweep", "--sizes", "tiny", "--ctx", "16", "--batch", "2", "--device", "cpu", *STEPS],
    "attention": ["attention", "--d", "8", "--seq", "16", "--batch", "1", "--iters", "2", "--device", "cpu"],
    "compare": ["compare", *TINY_ARGS, *STEPS, "--vary", "precision=fp32,bf16"],
    "ladder": ["ladder", *TINY_ARGS, *STEPS],
    "scale": ["scale", *TINY_ARGS, *STEPS, "--nproc", "1,2"],
    "serve": ["serve", "--port", "8765", *TINY_ARGS],   # refused before it listens: the port need not be free
}


def _env(data_dir) -> dict[str, str]:
    return {**os.environ, "PERFCONSOLE_DATA_DIR": str(data_dir)}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_data_dir_that_is_a_file_is_one_line_and_exit_2_before_any_work(tmp_path, name):
    a_file = tmp_path / "data"
    a_file.write_text("not a folder\n")
    out = pc(*COMMANDS[name], env=_env(a_file), stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert out.stderr.splitlines() == [f"perfconsole: error: PERFCONSOLE_DATA_DIR={a_file}: a file, not a directory; "
                                       "give it a directory (one not there yet is created)"]


def test_a_folder_below_a_file_is_named_too(tmp_path):
    a_file = tmp_path / "data"
    a_file.write_text("")
    out = pc(*COMMANDS["run"], env=_env(a_file / "perfconsole"), timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"{a_file} is a file, not a directory" in out.stderr and len(out.stderr.splitlines()) == 1


def _console_in_a_terminal(env: dict[str, str]) -> subprocess.CompletedProcess:
    """The console with a terminal for its keys and screen (stdin, stdout), its stderr captured apart."""
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen([*PC, *TINY_ARGS], stdin=child, stdout=child, stderr=subprocess.PIPE, env=env,
                                text=True, start_new_session=True)
        os.close(child)
        try:
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return subprocess.CompletedProcess(proc.args, proc.returncode, "", err)
    finally:
        os.close(main)


def test_in_a_terminal_the_console_refuses_a_data_dir_that_is_a_file_before_it_starts(tmp_path):
    a_file = tmp_path / "data"
    a_file.write_text("")
    out = _console_in_a_terminal(_env(a_file))
    assert out.returncode == 2, out.stderr[-2000:]
    assert "\x1b" not in out.stderr                     # the console never drew
    assert out.stderr.splitlines() == [f"perfconsole: error: PERFCONSOLE_DATA_DIR={a_file}: a file, not a directory; "
                                       "give it a directory (one not there yet is created)"]


def test_a_console_that_fails_once_up_exits_non_zero(tmp_path):
    # The data directory is one, but the warm process's folder in it is a file: the console fails as it
    # opens. Whatever fails it, the shell must learn of it (textual's run() returns no result then).
    (tmp_path / "warm").write_text("")
    out = _console_in_a_terminal(_env(tmp_path))
    assert "Traceback" in out.stderr or "Error" in out.stderr, out.stderr[-2000:]
    assert out.returncode == 1, out.stderr[-2000:]

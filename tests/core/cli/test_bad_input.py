"""Bad files and paths: one line `perfconsole: error: ...` naming the file, exit code 2, no traceback,
and for an output path, before any work starts."""
import json
import os
import pathlib
import stat
import subprocess

import pytest
from helpers import pc

SNAPSHOTS = pathlib.Path(__file__).resolve().parents[3] / "snapshots"
RUN = str(SNAPSHOTS / "tiny-cpu-train-fp32.json")
UNWRITABLE = "/proc/perfconsole-test.json"  # /proc takes no new file, for root too


def one_line_error(out: subprocess.CompletedProcess, *names: str) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("perfconsole: error: ")
    for name in names:
        assert name in lines[0]
    return lines[0]


@pytest.mark.parametrize("args", [
    ["run", "--size", "tiny", "--device", "cpu", "--ctx", "16", "--steps", "2", "--save", UNWRITABLE],
    ["sweep", "--sizes", "tiny", "--ctx", "16", "--steps", "2", "--device", "cpu", "--save", UNWRITABLE],
    ["attention", "--d", "8", "--seq", "16", "--batch", "1", "--iters", "2", "--device", "cpu", "--save", UNWRITABLE],
    ["export", RUN, "-o", UNWRITABLE],
    ["import", str(SNAPSHOTS / "tiny-cpu-train-torch-profile.json"), "--save", UNWRITABLE],
])
def test_an_unwritable_target_is_refused_before_the_work(args):
    out = pc(*args)
    one_line_error(out, UNWRITABLE, "cannot create a file in /proc")
    assert out.stdout == ""  # nothing ran, nothing was printed


def test_a_target_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "fifo"  # like a device: an atomic write would replace it with a file
    os.mkfifo(fifo)
    one_line_error(pc("export", RUN, "-o", str(fifo)), str(fifo), "not a regular file")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_deeply_nested_json_array(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    one_line_error(pc("export", str(deep)), str(deep), "nested too deeply")
    one_line_error(pc("export", "-", input="[" * 100_000), "<stdin>", "nested too deeply")


def test_a_file_that_is_not_utf8(tmp_path):
    bad = tmp_path / "latin1.json"
    bad.write_bytes('{"name": "caf\u00e9"}'.encode("latin-1"))
    one_line_error(pc("export", str(bad)), str(bad), "not UTF-8")


@pytest.mark.parametrize("command", ["export", "import"])
def test_a_directory_or_a_missing_path(tmp_path, command):
    one_line_error(pc(command, str(tmp_path)), str(tmp_path))
    missing = tmp_path / "nope.json"
    one_line_error(pc(command, str(missing)), str(missing))


def test_a_json_report_is_not_a_snapshot(tmp_path):
    report = tmp_path / "sweep-report.json"
    report.write_text(pc("export", str(SNAPSHOTS / "tiny-cpu-sweep.json"), "--format", "json").stdout)
    assert json.loads(report.read_text())["runs"]
    line = one_line_error(pc("export", str(report)), str(report), "sweep JSON report")
    assert "--save" in line


def test_import_of_a_run_without_profile_tables_says_so(tmp_path):
    one_line_error(pc("import", RUN), RUN, "no profile")
    report = tmp_path / "old.json"  # a run's report, which lists the profile's reports but not their tables
    report.write_text(pc("export", str(SNAPSHOTS / "tiny-cpu-train-torch-profile.json"), "-f", "json").stdout)
    one_line_error(pc("import", str(report)), str(report), "profile tables are not in this document")
    one_line_error(pc("import", str(SNAPSHOTS / "tiny-cpu-sweep.json")), "tiny-cpu-sweep.json", "a sweep snapshot")

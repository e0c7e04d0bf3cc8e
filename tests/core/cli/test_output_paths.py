"""One rule for the files a command writes (--save FILE, export -o FILE), the console's export dialog's too:
the folder must exist (a missing one is an error naming it, and nothing is created), and an existing file
is replaced only when asked (--force); without it the command refuses before any work starts, exit 2, in
one line naming the file and --force."""
from __future__ import annotations

import argparse
import signal
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.cli import ladder
from perfconsole.core.cli import main as cli
from perfconsole.core.grids.ladder import LadderRecord
from helpers import ROOT

SNAP = ROOT / "snapshots" / "tiny-cpu-train-fp32.json"
CSV = ROOT / "tests" / "fixtures" / "nsys" / "gpa" / "demo_cuda_gpu_kern_sum.csv"
if not CSV.exists():
    CSV = Path("/work/shared/fixtures/nsys/gpa/demo_cuda_gpu_kern_sum.csv")
CPU = ["--device", "cpu"]

# Each command that writes a file, up to the flag that names the file (export first: the cheapest).
WRITERS = {
    "export": ["export", str(SNAP), "-o"],
    "import": ["import", str(CSV), "--save"],
    "run": ["run", *CPU, "--size", "tiny", "--ctx", "16", "--warmup", "0", "--steps", "1", "--save"],
    "compare": ["compare", *CPU, "--size", "tiny", "--ctx", "16", "--warmup", "0", "--steps", "1",
                "--vary", "precision=fp32,bf16", "--save"],
    "sweep": ["sweep", *CPU, "--sizes", "tiny", "--ctx", "16", "--warmup", "0", "--steps", "2", "--save"],
    "attention": ["attention", *CPU, "--d", "16", "--seq", "64", "--batch", "1", "--warmup", "0", "--iters", "2",
                  "--save"],
    "ladder": ["ladder", *CPU, "--size", "tiny", "--ctx", "16", "--rungs", "eager", "--save"],
}


@pytest.fixture(autouse=True)
def _signal_handlers():
    """The commands install their stop handlers in this process: put pytest's back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


class Started(Exception):
    """Work began: what a refused command must never reach."""


def _no_work(monkeypatch) -> None:
    def started(*_a, **_k):
        raise Started
    for target in ("perfconsole.core.cli.run.make_launch", "perfconsole.core.cli.compare.InterleavedRuns",
                   "perfconsole.core.cli.sweep.SweepRunner", "perfconsole.core.cli.attention.AttentionRunner",
                   "perfconsole.core.cli.ladder.LadderRunner", "perfconsole.core.cli.export.export",
                   "perfconsole.core.cli.profile_import._read"):
        monkeypatch.setattr(target, started)


@pytest.mark.parametrize("command", list(WRITERS))
def test_an_existing_file_is_refused_before_any_work_without_force(command, tmp_path, monkeypatch, capsys):
    _no_work(monkeypatch)
    target = tmp_path / "out.json"
    target.write_text("keep me\n")
    code = cli.main([*WRITERS[command], str(target)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and str(target) in err and "--force" in err, err
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("command", list(WRITERS))
def test_force_lets_every_writing_command_replace_its_file(command, tmp_path, monkeypatch):
    _no_work(monkeypatch)
    target = tmp_path / "out.json"
    target.write_text("replace me\n")
    with pytest.raises(Started):  # past the check: the command goes on to its work
        cli.main([*WRITERS[command], str(target), "--force"])


def test_export_with_force_replaces_the_file(tmp_path, capsys):
    target = tmp_path / "run.md"
    target.write_text("old\n")
    assert cli.main(["export", str(SNAP), "-o", str(target), "--force"]) == 0
    assert target.read_text().startswith("# tiny ctx32")
    assert cli.main(["export", str(SNAP), "-o", str(tmp_path / "new.md")]) == 0   # a new file needs no --force


def test_a_missing_folder_is_an_error_naming_it_and_nothing_is_created(tmp_path, capsys):
    missing = tmp_path / "nonexistent" / "dir"
    assert cli.main(["export", str(SNAP), "-o", str(missing / "x.md")]) == 2
    assert capsys.readouterr().err.strip() == f"perfconsole: error: {missing}: no such directory"
    assert not (tmp_path / "nonexistent").exists()


def _stopped_ladder(tmp_path: Path) -> Path:
    args = cli.build_parser().parse_args(["ladder", *CPU, "--size", "tiny", "--ctx", "16", "--rungs", "eager"])
    path = tmp_path / "ladder.json"
    store.save(LadderRecord.new(ladder.ladder_spec_from_args(args)), path)
    return path


def test_ladder_resume_writes_back_to_its_own_file_without_force(tmp_path, monkeypatch):
    _no_work(monkeypatch)
    path = _stopped_ladder(tmp_path)
    with pytest.raises(Started):
        cli.main(["ladder", "--resume", str(path)])
    with pytest.raises(Started):                     # --save naming the same file is the same thing
        cli.main(["ladder", "--resume", str(path), "--save", str(path)])
    other = tmp_path / "other.json"
    other.write_text("keep me\n")
    assert cli.main(["ladder", "--resume", str(path), "--save", str(other)]) == 2   # another file: asks --force
    assert other.read_text() == "keep me\n"


def test_every_command_that_takes_a_file_to_write_takes_force():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        flags = {o for a in p._actions for o in a.option_strings}
        if flags & {"--save", "--output"}:
            assert "--force" in flags, name


@pytest.mark.e2e
def test_a_profiled_run_keeps_its_profiler_files_in_a_folder_named_after_its_snapshot_as_the_docs_say(tmp_path):
    from helpers import pc

    out = pc("run", *CPU, "--size", "tiny", "--ctx", "16", "--batch", "1", "--warmup", "1", "--steps", "2",
             "--profile", "torch", "--save", str(tmp_path / "prof.json"))
    assert out.returncode == 0, out.stderr
    files = [Path(f) for f in store.load(tmp_path / "prof.json").profile.files]
    assert files and all(f.parent == tmp_path / "prof" and f.is_file() for f in files), files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prof", "prof.json"]
    # cli.md said a --save creates nothing; it tells of this folder now (and the --help of --out-dir)
    docs = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    assert "keeps the profiler's files in a folder beside it named after it (`prof/` for `--save prof.json`" in docs

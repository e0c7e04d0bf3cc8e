"""`--executor` input that is wrong before Slurm is asked anything: one line, exit 2. And the config
files' defaults, the flags over them. (What Slurm itself refuses: tests/core/launch/slurm.)"""
from __future__ import annotations

import argparse

import pytest

from perfconsole.core.cli.main import main
from perfconsole.core.launch.slurm import parse_sacct
from perfconsole.core.launch.slurm_options import (SlurmOptionError, add_executor_arguments, from_config,
                                                   options_from_args)

SWEEP = ["sweep", "--sizes", "tiny", "--ctx", "8", "--steps", "2", "--device", "cpu"]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_nodes_without_the_slurm_executor_is_bad_input(capsys):
    assert main(["run", "--size", "tiny", "--device", "cpu", "--nproc", "2", "--nodes", "2"]) == 2
    assert "--nodes needs --executor slurm" in one_error_line(capsys)


def test_no_sbatch_on_path_is_bad_input(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert main([*SWEEP, "--executor", "slurm"]) == 2
    assert "sbatch is not on PATH" in one_error_line(capsys)


def test_a_config_file_that_does_not_parse_names_its_path_and_line(capsys, monkeypatch, tmp_path):
    conf = tmp_path / "perfconsole" / "slurm.toml"
    conf.parent.mkdir()
    conf.write_text('partition = "gpu"\naccount = \n', encoding="utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main([*SWEEP, "--executor", "slurm"]) == 2
    line = one_error_line(capsys)
    assert str(conf) in line and "line 2" in line


def test_an_unknown_config_key_is_named(monkeypatch, tmp_path):
    (tmp_path / "perfconsole.toml").write_text('[slurm]\npartitoin = "gpu"\n', encoding="utf-8")
    with pytest.raises(SlurmOptionError, match="unknown key 'partitoin'"):
        from_config([tmp_path / "perfconsole.toml"])


def test_the_project_file_overrides_the_users_and_the_flags_override_both(tmp_path):
    user = tmp_path / "slurm.toml"
    user.write_text('partition = "a"\naccount = "lab"\ntime = 30\noptions = { mem = "8G" }\n', encoding="utf-8")
    project = tmp_path / "perfconsole.toml"
    project.write_text('[slurm]\npartition = "b"\noptions = { exclusive = true }\n', encoding="utf-8")
    p = argparse.ArgumentParser()
    add_executor_arguments(p)
    args = p.parse_args(["--executor", "slurm", "--slurm-time", "0:10:00", "--slurm-option", "mem=16G"])
    opts = options_from_args(args, [user, project])
    assert (opts.partition, opts.account, opts.time) == ("b", "lab", "0:10:00")
    assert opts.options == {"mem": "16G", "exclusive": True}
    assert opts.sbatch_flags() == ["--time=0:10:00", "--partition=b", "--account=lab", "--mem=16G", "--exclusive"]


def test_sacct_lines_become_job_states():
    text = ("12|TIMEOUT|None|vm|2026-01-01T10:00:00|2026-01-01T10:00:02|2026-01-01T10:01:12|0:15\n"
            "13_1|CANCELLED by 0|None|None assigned|2026-01-01T10:00:00|Unknown|Unknown|0:0\n")
    got = parse_sacct(text)
    assert got["12"].state == "TIMEOUT" and got["12"].ended and got["12"].nodes == "vm"
    assert got["13_1"].state == "CANCELLED" and got["13_1"].nodes == ""


def test_replicates_on_different_nodes_say_so_beside_the_interval():
    from perfconsole.core.cli.executor import nodes_note
    from perfconsole.core.record import RunRecord
    from perfconsole.core.settings import RunSpec

    record = RunRecord(RunSpec(size="tiny", device="cpu", repeat=2))
    record.jobs = [{"job_id": "1", "nodes": ["n1"]}, {"job_id": "2", "nodes": ["n1"]}]
    assert nodes_note(record) == ""
    record.jobs[1]["nodes"] = ["n2"]
    assert "ran on 2 nodes (n1, n2)" in nodes_note(record)

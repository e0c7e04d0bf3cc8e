"""The headless CLI through the real `perfconsole` entry point, as a user runs it."""
import json
import re
import subprocess

import pytest
from helpers import pc, point_at_warm

TINY = ["--size", "tiny", "--ctx", "32", "--batch", "2", "--device", "cpu", "--warmup", "1", "--steps", "3"]


def test_run_json_prints_the_snapshot_save_writes(tmp_path):
    out = pc("run", *TINY, "--mode", "train", "--json", "--save", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    assert out.stdout == (tmp_path / "r.json").read_text()  # one document, byte for byte
    doc = json.loads(out.stdout)
    assert doc["schema"] == 1 and doc["kind"] == "run"
    run = doc["data"]
    assert run["status"] == "ok" and run["spec"]["size"] == "tiny"
    assert len(run["warmup_steps"]) == 1 and len(run["steps"]) == 3
    assert set(run["steps"][0]) == {"index", "warmup", "total_ms", "forward_ms", "backward_ms", "optimizer_ms",
                                    "loss", "host_ms", "host_forward_ms", "host_backward_ms"}
    step = run["steps"][0]
    assert step["loss"] > 0 and step["host_ms"] is None and step["host_forward_ms"] is None  # no GPU: no host/GPU split
    assert run["summary"]["host_forward_ms"] is None and run["summary"]["host_backward_ms"] is None
    assert step["host_backward_ms"] is None
    assert set(run["summary"]["total_ms"]) >= {"mean", "std", "median", "min", "max", "n", "ci95_low"}
    for key in ("tokens_per_s", "flops_per_step", "achieved_tflops", "mfu", "peak_allocated_mib"):
        assert key in run["summary"]
    md = pc("export", str(tmp_path / "r.json"), "--format", "md")
    assert md.returncode == 0 and "| tiny | 32 | train | fp32 |" in md.stdout


@pytest.fixture(scope="module")
def fwd_json() -> str:
    """One fwd run's --json output, for the tests that only read it."""
    run = pc("run", *TINY, "--mode", "fwd", "--json")
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.fixture(scope="module")
def train_table() -> subprocess.CompletedProcess:
    """One train run's table, for the tests that only read it."""
    return pc("run", *TINY, "--mode", "train")


def test_json_output_pipes_into_export(fwd_json):
    md = pc("export", "-", "--format", "md", input=fwd_json)
    assert md.returncode == 0, md.stderr
    assert "| tiny | 32 | fwd | fp32 |" in md.stdout


def test_fwd_mode_has_no_backward_phases(fwd_json):
    run = json.loads(fwd_json)["data"]
    assert run["steps"][0]["backward_ms"] is None and run["summary"]["backward_ms"] is None
    report = json.loads(pc("export", "-", "--format", "json", input=json.dumps({"schema": 1, "kind": "run",
                                                                                 "data": run})).stdout)
    assert set(report["steps"][0]) == {"index", "total_ms", "forward_ms"}


def test_table_output(train_table):   # fwd_bwd's phases: tests/core/measure/test_worker_e2e.py
    out = train_table
    assert out.returncode == 0
    # The tests' data folders hold the session's measured peaks (tests/conftest.py): no run measures them again.
    assert "measuring this device's peaks" not in " ".join(out.stderr.split()), out.stderr
    assert "forward" in out.stdout and "backward" in out.stdout and "tokens/s" in out.stdout
    # three steps: no interval of the median, and the caption says why (six give one: test_stats.py)
    assert "3 measured steps: too few for the median's 95% interval (6 needed" in " ".join(out.stdout.split())
    assert [line.split("\t")[4] for line in out.stdout.splitlines() if line.startswith("total\t")] == ["too few steps"]


@pytest.mark.parametrize("args, words", [
    (["run", "--size", "huge", "--device", "cpu"], "size: must be one of tiny, small"),
    (["run", "--precision", "fp8", "--device", "cpu"], "precision: must be one of fp32, bf16, fp16"),
    # The flag says what the launch form says of the same text (argparse's own words were "invalid int value").
    (["run", "--ctx", "abc"], "argument --ctx: must be an integer, not 'abc'"),
    (["run", "--size", "tiny", "--device", "cpu", "--steps", "0"], "steps: must be from 1"),
    (["run", "--size", "tiny", "--device", "cpu", "--compile", "--warmup", "0"], "warmup: compile needs at least 1"),
    (["run", *TINY, "--save", "/nonexistent/dir/x.json"], "no such directory"),
    (["export", "/nonexistent.json"], "no such file or directory"),
    (["export", "x.json", "--format", "xlsx"], ""),
    # An option is never read as the prefix of another (it was "ambiguous option: --mode could match --model").
    (["ladder", "--device", "cpu", "--mode", "fwd"], "argument --mode: invalid choice: 'fwd' (choose from 'train')"),
    (["run", *TINY, "--mod", "fwd"], "unrecognized arguments: --mod fwd"),
    # The console's flags before a command: the command's own defaults would replace them without a word.
    (["--ctx", "64", "--precision=bf16", "run", *TINY],
     "--ctx, --precision=bf16: given before 'run', the console's flags, which 'run' never sees"),
])
def test_bad_input_is_one_line_exit_2(args, words):
    out = pc(*args)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert words in out.stderr


def test_oom_exit_code_and_json_status():
    out = pc("run", *TINY, "--json", env={**__import__("os").environ, "PERFCONSOLE_FAULT": "oom:2"})
    assert out.returncode == 3
    run = json.loads(out.stdout)["data"]
    assert run["status"] == "oom" and run["error"]["kind"] == "oom" and len(run["steps"]) == 1


def test_help_lists_commands():
    out = pc("--help")
    assert out.returncode == 0
    for cmd in ("run", "export"):
        assert cmd in out.stdout


def test_a_single_step_run_is_valid_json():
    out = pc("run", "--size", "tiny", "--ctx", "32", "--device", "cpu", "--warmup", "0", "--steps", "1", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data"]["summary"]["total_ms"]["ci95_low"] is None


def test_size_defaults_to_tiny_on_the_cpu_and_small_on_cuda():
    import argparse

    from perfconsole.core.cli.main import add_spec_arguments, spec_from_args

    p = argparse.ArgumentParser()
    add_spec_arguments(p)
    assert spec_from_args(p.parse_args(["--device", "cpu"])).size == "tiny"
    assert spec_from_args(p.parse_args(["--device", "cuda"]), validate=False).size == "small"
    assert spec_from_args(p.parse_args(["--device", "cpu", "--size", "medium"])).size == "medium"
    raw = spec_from_args(p.parse_args(["--device", "cpu", "--ctx", "0"]), validate=False)
    assert raw.ctx == 0 and raw.size == "tiny"


def test_a_sweep_s_sizes_default_as_a_run_s_size_does(capsys):
    """A sweep on the CPU was a grid of `small` cells at seconds a step; it now takes `run`'s default."""
    from perfconsole.core.cli.main import build_parser
    from perfconsole.core.cli.sweep import sweep_spec_from_args

    p = build_parser()
    assert sweep_spec_from_args(p.parse_args(["sweep", "--device", "cpu"])).sizes == ("tiny",)
    assert sweep_spec_from_args(p.parse_args(["sweep", "--device", "cpu", "--sizes", "small,tiny"])).sizes == (
        "small", "tiny")
    with pytest.raises(SystemExit):
        p.parse_args(["sweep", "--help"])
    assert "tiny on cpu" in " ".join(capsys.readouterr().out.split())


def test_the_attention_grid_on_the_cpu_defaults_to_the_sequences_it_can_finish(capsys):
    """`attention --device cpu` was the GPU's grid, up to seq 16384: its progress bar said 61 hours left."""
    from perfconsole.core.cli.main import build_parser
    from perfconsole.core.cli.attention import spec_from_args

    p = build_parser()
    assert spec_from_args(p.parse_args(["attention", "--device", "cpu"])).seqs == (256, 1024)
    assert spec_from_args(p.parse_args(["attention", "--device", "cpu", "--seq", "4096"])).seqs == (4096,)
    with pytest.raises(SystemExit):
        p.parse_args(["attention", "--help"])
    assert "256,1024 on cpu" in " ".join(capsys.readouterr().out.split())


def test_cuda_without_a_gpu_is_bad_input_in_one_line():
    from perfconsole.core.telemetry.nvml import gpu_count

    if gpu_count() > 0:
        pytest.skip("this machine has a GPU")
    for cmd in (["run", "--size", "tiny"], ["sweep", "--sizes", "tiny", "--ctx", "16"], ["attention", "--d", "16"]):
        out = pc(*cmd, "--device", "cuda")
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == ("perfconsole: error: device: cuda, but no NVIDIA GPU is visible on this "
                                      "machine; use cpu"), out.stderr


def test_help_shows_the_defaults():
    out = pc("run", "--help")
    text = " ".join(out.stdout.split())
    assert "--ctx CTX context length (tokens) (default: 256)" in text
    assert "--repeat N" in text and "(default: 1)" in text
    no_reshard = text[text.index("--no-reshard FSDP"):text.index("--fsdp-bf16 FSDP")]
    assert "default" not in no_reshard  # "(default: True)" read as if no-reshard were on


def test_one_step_shows_no_spread_and_a_profiled_run_says_where_its_files_went(tmp_path):
    one = pc("run", "--size", "tiny", "--ctx", "16", "--device", "cpu", "--warmup", "0", "--steps", "1")
    row = next(line for line in one.stdout.splitlines() if line.startswith("total"))
    assert row.split("\t")[2] == "-" and "one measured step: no spread" in one.stdout
    prof = pc("run", "--size", "tiny", "--ctx", "16", "--device", "cpu", "--warmup", "1", "--steps", "2",
              "--mode", "train", "--profile", "torch", "--save", "p.json", cwd=tmp_path)  # a relative path
    assert prof.returncode == 0, prof.stderr
    trace = tmp_path / "p" / "torch_trace.json"
    assert trace.is_file() and f"files: {trace}" in prof.stdout  # absolute: the record is read from anywhere
    assert "profile (torch):" in prof.stdout and "in no phase" in prof.stdout and "profiled " in prof.stdout
    # What the figures are: the profiler's sums over its rows (CPU ops here), and what the quiet step is.
    caption = [line.removeprefix("# ") for line in prof.stdout.splitlines() if line.startswith("# ")]
    sums = next(i for i, line in enumerate(caption) if line.startswith("the profiler's CPU-op-time sums per step "
                                                                         "for each phase ("))
    assert re.fullmatch(r"forward [\d.]+ ms, backward [\d.]+ ms, optimizer [\d.]+ ms", caption[sums + 1]), caption
    assert re.fullmatch(r"a profiled step took [\d.]+x the quiet step \(the step timed without the profiler\)",
                        caption[sums + 2]), caption
    assert all(len(line) <= 80 for line in caption[sums:sums + 3]), caption
    assert pc("import", str(trace)).returncode == 0


def test_run_names_its_speed_of_light_and_an_unsupported_spec_exits_2(train_table):
    out = train_table
    assert out.returncode == 0, out.stderr
    assert "speed of light: floor " in out.stdout and "(forward " in out.stdout
    bad = pc("run", *TINY, "--mode", "train", "--fp8", "--precision", "bf16", "--json")
    assert bad.returncode == 2 and bad.stdout == ""     # refused before any process: the spec rules it out
    assert bad.stderr.strip() == "perfconsole: error: fp8: fp8 matmuls need device cuda"


def test_peaks_a_run_beats_are_named_in_figures_and_dropped_from_the_cache(tmp_path, cpu_peaks_file, monkeypatch):
    """Peaks measured while something else held the device are far too low; the next run beats its floor."""
    from perfconsole.core.flops import PEAKS_FILE

    data = tmp_path / "data"
    data.mkdir()
    doc = json.loads(cpu_peaks_file.read_text())
    low = {key: {**p, "matmul_tflops": {k: v * 1e-6 for k, v in p["matmul_tflops"].items()},
                 "bandwidth_gbps": p["bandwidth_gbps"] * 1e-6} for key, p in doc.items()}
    (data / PEAKS_FILE).write_text(json.dumps(low))
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(data))
    point_at_warm()  # its runs fork from the test worker's warm process, as the suite's others do (tests/conftest.py)
    out = pc("run", *TINY, "--mode", "train", "--save", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    assert "speed of light: the total ran in " in out.stdout and "under its floor of" in out.stdout
    assert "% of it" not in out.stdout
    assert "dropped from the cache, the next run measures them again" in " ".join(out.stderr.split())
    assert json.loads((data / PEAKS_FILE).read_text()) == {}
    sol = json.loads((tmp_path / "r.json").read_text())["data"]["summary"]["speed_of_light"]
    assert "total_ms" in sol["beaten"] and sol["total_ms"]["fraction"] > 1e3
    again = pc("run", *TINY, "--mode", "train")  # measures afresh, and keeps what it measured
    assert again.returncode == 0 and "speed of light: floor " in again.stdout, again.stdout + again.stderr
    assert set(json.loads((data / PEAKS_FILE).read_text())) == set(doc)

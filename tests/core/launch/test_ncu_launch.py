"""`--profile ncu` without a GPU: what the spec allows, what runs where ncu is absent (nothing: `unsupported`, one
line saying what to install), the ncu command a run would start, the metrics asked of the device (from its real
`--query-metrics` lines, tests/fixtures/ncu) and what ncu's log says when it profiled nothing.
The run itself is tests/core/launch/test_ncu_gpu.py's, on the GPU machine."""
from __future__ import annotations


import pytest

from perfconsole.core.launch import ncu as tool
from perfconsole.core.launch.ncu_launch import NcuLaunch, timed_spec
from perfconsole.core.launch.replicates import make_launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec, SpecError
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "ncu"
SPEC = RunSpec(size="tiny", device="cuda", profile="ncu", warmup=1, steps=2)


def test_spec_rules():
    with pytest.raises(SpecError, match="profile: ncu needs device cuda"):
        SPEC.with_(device="cpu").validate()
    with pytest.raises(SpecError, match="profile: ncu profiles one process; use nproc 1"):
        SPEC.with_(nproc=2, parallel="ddp").validate()
    assert SPEC.validate().label().endswith("ncu")


def test_without_ncu_nothing_runs_and_the_run_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv(tool.NCU_ENV, str(tmp_path / "no-such-ncu"))
    launch = make_launch(SPEC, out_dir=tmp_path)
    assert isinstance(launch, NcuLaunch) and launch.timed.spec == timed_spec(SPEC)
    assert launch.timed.spec.profile == "torch"
    record = RunRecord(SPEC)
    for event in launch.events():
        record.apply(event)
    assert record.status == "unsupported" and not record.steps
    assert record.error.kind == "unsupported" and "needs Nsight Compute's ncu" in record.error.message
    assert launch.timed.proc is None  # the timed process never started
    assert list(tmp_path.iterdir()) == []


def test_find_ncu(monkeypatch, tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert tool.find_ncu({tool.NCU_ENV: str(fake)}) == str(fake)
    assert tool.find_ncu({tool.NCU_ENV: str(tmp_path / "missing")}) is None  # named and absent: not another one
    assert tool.find_ncu({"PATH": str(tmp_path)}) == str(fake)


def test_metrics_asked_are_the_devices():
    names = tool.device_metric_names("ncu", lambda argv, t: _done((FIXTURES / "query_metrics_h100_excerpt.txt")
                                                                   .read_text()))
    assert "sm__ops_path_tensor_src_bf16_dst_fp32" in names and "dram__bytes_read" in names
    asked = tool.metrics_to_ask(names)
    assert asked[:3] == ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"]
    tensor = [m for m in asked if m.startswith("sm__ops_path_tensor")]
    # Floating-point sources only (integer ops are no FLOPs), no sparsity parts, each as a count.
    assert tensor == ["sm__ops_path_tensor_src_bf16_dst_fp32.sum", "sm__ops_path_tensor_src_fp16.sum",
                      "sm__ops_path_tensor_src_fp64.sum", "sm__ops_path_tensor_src_fp8.sum",
                      "sm__ops_path_tensor_src_tf32_dst_fp32.sum"]
    # A counter the device's list lacks is not asked for: the excerpt, its first 80 lines, ends before the smsp__
    # SASS counters (the whole list has them: the run asked for them and ncu measured them).
    assert not any(m.startswith("smsp__sass") for m in asked)
    assert tool.metrics_to_ask([])[:3] == asked[:3]  # ncu could not say: the sections and the base counters


def _done(stdout: str):
    import subprocess

    return subprocess.CompletedProcess([], 0, stdout, "")


def test_profile_command(tmp_path):
    kernels = ["nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN",
               "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
               "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"]
    argv = ["python3", "-m", "perfconsole.core.measure.worker", "--spec", "{}"]
    cmd = tool.profile_command("/opt/ncu", kernels, ["gpu__time_duration.sum"], tmp_path / "ncu", tmp_path / "log",
                               argv)
    assert cmd[0] == "/opt/ncu" and cmd[-len(argv):] == argv
    flags = " ".join(cmd[1:-len(argv)])
    for part in ("--profile-from-start off", "--target-processes application-only", "--kernel-name-base demangled",
                 "--filter-mode per-launch-config", "--launch-skip 0", "--launch-count 1", "--clock-control none",
                 "--section SpeedOfLight", "--section SpeedOfLight_RooflineChart", "--section Occupancy",
                 "--section LaunchStats", "--metrics gpu__time_duration.sum", f"--export {tmp_path / 'ncu'}"):
        assert part in flags, part
    regex = cmd[cmd.index("--kernel-name") + 1]
    assert regex == "regex:(^|[: ])(nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN|vectorized_elementwise_kernel)($|[<(])"


def test_what_the_log_says():
    asked = ["nvjet_sm90_tst_96x64_64x8_1x2_h_bz_NNN"]
    ok = (FIXTURES / "small_train_ncu.log").read_text()
    assert tool.diagnose(ok, True, asked) is None
    refused = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
               "Counters on the target device 0.\n==PROF== Disconnected from process 1\n")
    said = tool.diagnose(refused, False, asked)
    assert "ERR_NVGPUCTRPERM" in said and "NVreg_RestrictProfilingToAdminUsers=0" in said and "kept" in said
    nothing = "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n"
    assert tool.diagnose(nothing, False, asked).startswith("ncu's kernel filter matched nothing")

"""A process says which profiler it ran under (core.measure.provenance), and a record proves its headline's
process ran under none, with no figure compared: the reading on made-up and real processes, and a
torch-profiled tiny CPU run end to end. nsys's path is checked the same way on the GPU machine
(tests/core/launch/test_profiled_headline_gpu.py)."""
from __future__ import annotations

import os

import pytest
import torch

from perfconsole.core import events as ev
from perfconsole.core.launch.replicates import make_launch
from perfconsole.core.measure import provenance
from perfconsole.core.measure.provenance import headline_problems, judge, mapped_libraries
from perfconsole.core.record import RunRecord
from helpers import TINY, stream

# What the processes named below had, as their own /proc/self/maps and environment read on an H100 with nsys and
# ncu 2025.3.1 from the Nsight Compute install (docs/results/nsys_headline_h100.md, the provenance call).
NSYS_BIN = "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64"
UNDER_NSYS = ({"CUDA_INJECTION64_PATH": f"{NSYS_BIN}/libToolsInjection64.so", "CUPTI_PROFILE_MODE": "_",
               "LD_PRELOAD": f"{NSYS_BIN}/libToolsInjectionProxy64.so:{NSYS_BIN}/libLinuxKeyboardInterceptorProxy.so",
               "NSYS_PROFILING_SESSION_ID": "101584", "NVTX_INJECTION64_PATH": f"{NSYS_BIN}/libToolsInjection64.so",
               "QUADD_AGENT_PID": "1573"},
              ["libToolsInjection64.so", "libToolsInjectionMemoryAllocator.so", "libToolsInjectionProxy64.so",
               "libcupti.so.13", "libcupti.so.13.0"])
UNDER_NCU = ({"NV_COMPUTE_PROFILER_PERFWORKS_DIR": "/opt/nvidia/nsight-compute/2025.3.1/target/x64/.",
              "NV_NSIGHT_INJECTION_TRANSPORT_TYPE": "uds"},
             ["libInterceptorInjectionTarget.so", "libTreeLauncherTargetInjection.so", "libcupti.so.13",
              "libnvperf_host.so", "libnvperf_target.so"])
PLAIN_CUDA = ({}, ["libcupti.so.13"])  # torch's CUDA build maps libcupti with no profiler running


def test_each_profiler_is_named_by_what_it_leaves_in_the_process():
    assert judge(*UNDER_NSYS, torch_profiler=False)[0] == "nsys"
    assert judge(*UNDER_NCU, torch_profiler=False)[0] == "ncu"
    assert judge(*PLAIN_CUDA, torch_profiler=False) == (None, [])
    assert judge({}, [], torch_profiler=True) == ("torch", ["torch.profiler running"])
    # A process under nsys that also runs the torch profiler is nsys's: the injection is in the whole process.
    assert judge(*UNDER_NSYS, torch_profiler=True)[0] == "nsys"
    # Each sign alone is enough, and is said.
    for name in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD"):
        profiler, signs = judge({name: UNDER_NSYS[0][name]}, [], torch_profiler=False)
        assert profiler == "nsys" and signs == [f"{name}={UNDER_NSYS[0][name]}"]
    assert judge({}, ["libToolsInjection64.so"], torch_profiler=False) == ("nsys", ["libToolsInjection64.so mapped"])
    assert judge({"NSYS_PROFILING_SESSION_ID": "1"}, [], False)[0] == "nsys"
    assert judge({"CUDA_INJECTION64_PATH": "/opt/other/libtracer.so"}, [], False)[0] == "injected"


def test_the_memory_map_gives_the_profilers_libraries_only(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        f"7f02-7f03 r-xp 00000000 08:01 2 {NSYS_BIN}/libToolsInjection64.so\n"
        "7f04-7f05 r-xp 00000000 08:01 3 /venv/nvidia/cu13/lib/libcupti.so.13\n"
        "7f06-7f07 rw-p 00000000 00:00 0 \n"
        "7f08-7f09 r-xp 00000000 08:01 4 /venv/torch/lib/libtorch_cuda.so\n")
    assert mapped_libraries(maps) == (["libToolsInjection64.so", "libcupti.so.13"], str(maps))
    assert mapped_libraries(tmp_path / "gone") == ([], f"unreadable: {tmp_path / 'gone'}: No such file or directory")
    seen = provenance.read(environ=UNDER_NSYS[0], maps=maps)
    assert seen.profiler == "nsys" and seen.pid == os.getpid() and seen.libraries == ["libToolsInjection64.so",
                                                                                        "libcupti.so.13"]
    assert "LD_PRELOAD" in seen.variables and "PATH" not in seen.variables  # only what profilers set is kept


def test_this_process_names_the_torch_profiler_only_while_it_runs():
    before = provenance.read(environ={})
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        torch.ones(8).sum()
        during = provenance.read(environ={})
    after = provenance.read(environ={})
    assert (before.profiler, during.profiler, after.profiler) == (None, "torch", None)
    assert during.signs == ["torch.profiler running"]


def _record(headline: dict | None, capture: dict | None, profiler: str = "torch") -> RunRecord:
    record = RunRecord(TINY.with_(profile=profiler))
    if headline is not None:
        record.apply(ev.Provenance(**headline))
    record.apply(ev.ProfileOverhead(profiler, 1.0, 2.0, 2.0, 3, 3, provenance=capture))
    record.apply(ev.ProfileReady(profiler, []))
    return record


def test_a_record_proves_its_headline_or_says_why_not():
    clean = {"pid": 7, "profiler": None, "signs": []}
    nsys = {"pid": 8, "profiler": "nsys", "signs": ["libToolsInjection64.so mapped"]}
    assert headline_problems(_record(clean, {**nsys}, "nsys")) == []
    assert headline_problems(_record(clean, {"pid": 7, "profiler": "torch", "signs": []})) == []
    assert headline_problems(_record(None, nsys, "nsys")) == [
        "no process of the headline said what it ran under (no provenance)"]
    assert headline_problems(_record(nsys, nsys, "nsys")) == [
        "the headline's process 8 ran under nsys: libToolsInjection64.so mapped",
        "the headline's steps came from the nsys process 8"]
    assert headline_problems(_record(clean, None, "nsys")) == ["the profile does not say what its process ran under"]
    assert headline_problems(_record(clean, clean, "nsys")) == ["the nsys profile's process names None as its profiler"]


@pytest.fixture(scope="module")
def torch_profiled(tmp_path_factory):
    """A torch-profiled tiny CPU run, one process: its quiet steps, then its profiled ones."""
    spec = TINY.with_(profile="torch")
    launch = make_launch(spec, out_dir=tmp_path_factory.mktemp("provenance"))
    launch.start()
    return stream(launch, RunRecord(spec))


@pytest.mark.e2e
def test_a_torch_profiled_runs_headline_comes_from_steps_with_no_profiler(torch_profiled):
    record = torch_profiled
    assert record.status == "ok", record.error
    [headline] = record.provenance
    capture = record.profile.overhead["provenance"]
    assert headline["profiler"] is None and headline["signs"] == []
    assert capture["profiler"] == "torch" and capture["signs"] == ["torch.profiler running"]
    assert headline["pid"] == capture["pid"]  # the same process, before and during its profiler
    assert headline_problems(record) == []
    # The headline's steps are the quiet ones; the profiled steps are kept apart, in the profile's overhead.
    o = record.profile.overhead
    assert len(record.steps) == TINY.steps and o["quiet_ms"] == pytest.approx(record.summary.total_ms.median)
    # Saved and read back, the record still proves it.
    again = RunRecord.from_dict(record.to_dict())
    assert again.provenance == record.provenance and headline_problems(again) == []


@pytest.mark.e2e
def test_a_headline_from_a_process_with_a_profiler_injected_is_named(tmp_path):
    """The worker's own environment carries nsys's NVTX injection (a CPU run loads nothing from it): its record
    names nsys for the headline, whatever its times."""
    injected = f"{NSYS_BIN}/libToolsInjection64.so"
    launch = make_launch(TINY, out_dir=tmp_path, env={"NVTX_INJECTION64_PATH": injected})
    launch.start()
    record = stream(launch, RunRecord(TINY))
    assert record.status == "ok", record.error
    assert headline_problems(record) == [
        f"the headline's process {record.provenance[0]['pid']} ran under nsys: NVTX_INJECTION64_PATH={injected}"]

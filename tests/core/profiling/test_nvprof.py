"""nvprof logs. No captured nvprof fixture exists (FORMATS.md covers nsys only); the log below follows nvprof's
summary mode as printed by CUDA 10-11 (`==PID== Profiling result:`, a `Type Time(%) Time Calls Avg Min
Max Name` table whose section label sits on the first row, times with s/ms/us/ns units, and the NVTX
result sections per thread, domain and range)."""
from __future__ import annotations

from pathlib import Path

import pytest

from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.nvprof import parse_nvprof, parse_time

LOG = """\
==4242== NVPROF is profiling process 4242, command: python bench.py
==4242== Profiling application: python bench.py
==4242== Profiling result:
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
 GPU activities:   61.20%  1.23456s      1000  1.2346ms  1.1000ms  1.5000ms  volta_sgemm_128x64_nn
                   20.00%  403.45ms      2000  201.72us  200.00us  300.00us  void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>, at::detail::Array<char*, 3>>(int, at::native::MulFunctor<float>, at::detail::Array<char*, 3>)
                    0.01%     800ns         1     800ns     800ns     800ns  [CUDA memcpy HtoD]
      API calls:   50.00%  2.00000s      3000  666.67us  1.2000us  10.000ms  cudaLaunchKernel
                   10.00%  400.00ms         1  400.00ms  400.00ms  400.00ms  cudaMalloc

==4242== NVTX result:
==4242==   Thread "<unnamed>" (id = 12345)
==4242==     Domain "<unnamed>"
==4242==       Range "forward"
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
          Range:  100.00%  123.45ms        10  12.345ms  12.000ms  13.000ms  forward
 GPU activities:   80.00%  90.000ms       100  900.00us  800.00us  1.0000ms  volta_sgemm_128x64_nn
                   20.00%  22.500ms       100  225.00us  200.00us  250.00us  void softmax_warp_forward<float, float, float, 8, false>(float*, float const*, int, int, int)
      API calls:  100.00%  1.0000ms       100  10.000us  9.0000us  11.000us  cudaLaunchKernel

==4242==       Range "optimizer_step"
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
          Range:  100.00%  1.0000ms        10  100.00us  90.000us  110.00us  optimizer_step
No kernels were profiled in this range.
No API activities were profiled in this range.

==4242==     Domain "app"
==4242==       Range "load"
            Type  Time(%)      Time     Calls       Avg       Min       Max  Name
          Range:  100.00%  2.0000s          1  2.0000s   2.0000s   2.0000s   load
"""


@pytest.mark.parametrize("text,ns", [("1.23456s", 1234560000), ("403.45ms", 403450000), ("201.72us", 201720),
                                     ("800ns", 800), ("1.0000ms", 1000000)])
def test_units(text: str, ns: int) -> None:
    assert parse_time(text) == ns


def test_nvprof_log_maps_onto_nsys_reports(tmp_path: Path) -> None:
    path = tmp_path / "nvprof.log"
    path.write_text(LOG)
    tables, warnings = load_profile(path)
    assert warnings == []
    assert set(tables) == {"cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_api_sum", "nvtx_sum", "nvtx_kern_sum"}
    kern = tables["cuda_gpu_kern_sum"]
    assert [(r["name"][:21], r["instances"], r["total_time_ns"], r["avg_ns"]) for r in kern] == [
        ("volta_sgemm_128x64_nn", 1000, 1234560000, 1234600), ("void at::native::vect", 2000, 403450000, 201720)]
    assert kern[1]["name"].endswith("at::detail::Array<char*, 3>)")
    assert tables["cuda_gpu_mem_time_sum"] == [{"time_pct": 0.01, "total_time_ns": 800, "count": 1, "avg_ns": 800,
                                                "min_ns": 800, "max_ns": 800,
                                                "operation": "[CUDA memcpy Host-to-Device]"}]
    assert [r["num_calls"] for r in tables["cuda_api_sum"]] == [3000, 1]
    nvtx = {(r["domain"], r["range"]): r for r in tables["nvtx_sum"]}
    assert set(nvtx) == {("", "forward"), ("", "optimizer_step"), ("app", "load")}
    assert nvtx[("", "forward")]["instances"] == 10 and nvtx[("", "forward")]["total_time_ns"] == 123450000
    nk = tables["nvtx_kern_sum"]
    assert {(r["range"], r["name"][:20], r["kern_inst"], r["nvtx_inst"]) for r in nk} == {
        ("forward", "volta_sgemm_128x64_nn"[:20], 100, 10), ("forward", "void softmax_warp_fo", 100, 10)}


def test_two_threads_add_up() -> None:
    two = LOG.replace('==4242==     Domain "app"', '==4242==   Thread "<unnamed>" (id = 999)\n'
                      '==4242==     Domain "<unnamed>"\n==4242==       Range "forward"\n'
                      '            Type  Time(%)      Time     Calls       Avg       Min       Max  Name\n'
                      '          Range:  100.00%  10.000ms         2  5.0000ms  4.0000ms  6.0000ms  forward\n\n'
                      '==4242==     Domain "app"')
    tables, _ = parse_nvprof(two, "two.log")
    fwd = next(r for r in tables["nvtx_sum"] if r["range"] == "forward")
    assert (fwd["instances"], fwd["total_time_ns"], fwd["min_ns"], fwd["max_ns"]) == (12, 133450000, 4000000, 13000000)


def test_bad_row_names_file_and_line_and_keeps_the_rest() -> None:
    bad = LOG.replace("                   10.00%  400.00ms         1  400.00ms", "                   10.00%  400.00xs         1  400.00ms")
    tables, warnings = parse_nvprof(bad, "bad.log")
    assert len(warnings) == 1 and warnings[0].startswith("bad.log:9: ")
    assert len(tables["cuda_api_sum"]) == 1  # the row before the bad one
    assert len(tables["nvtx_sum"]) == 3  # later sections still load

"""The NVTX result section of an nvprof log (llm.c train_gpt2cu-like, see tests/fixtures/nvprof/SOURCE.txt:
the fixture is hand-written from known facts, not captured) -> nvtx_sum and nvtx_kern_sum."""
from __future__ import annotations

from pathlib import Path

import pytest

from perfconsole.core.profiling.analyses import top_kernels
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.nvprof import parse_nvprof

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "nvprof" / "llmc_train_gpt2cu_nvtx.log"
TEXT = LOG.read_text()
LINES = TEXT.splitlines(keepends=True)
NVTX_LINE = 34  # `==31337== NVTX result:`
SUMMARY = ("cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_api_sum")
SGEMM_TN, SGEMM_NN = "volta_sgemm_128x64_tn", "volta_sgemm_128x64_nn"
NCCL_KERNEL = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"


def _kernels(tables: dict, rng: str) -> list[tuple]:
    return [(r["name"].split("(")[0], r["kern_inst"], r["total_time_ns"], r["avg_ns"], r["min_ns"], r["max_ns"])
            for r in tables["nvtx_kern_sum"] if r["range"] == rng]


def test_fixture_loads_every_table_and_passes_on_nvprofs_warning() -> None:
    tables, warnings = load_profile(LOG)
    assert set(tables) == {*SUMMARY, "nvtx_sum", "nvtx_kern_sum"}
    assert warnings == [f"{LOG}:35: nvprof Warning: Found 1 invalid range marker(s)"]
    assert {k: len(v) for k, v in tables.items()} == {
        "cuda_gpu_kern_sum": 16, "cuda_gpu_mem_time_sum": 3, "cuda_api_sum": 9, "nvtx_sum": 4, "nvtx_kern_sum": 37}


def test_ranges_exact_values() -> None:
    tables, _ = parse_nvprof(TEXT, "f.log")
    got = [(r["domain"], r["range"], r["instances"], r["total_time_ns"], r["avg_ns"], r["min_ns"], r["max_ns"],
            r["time_pct"], r["style"]) for r in tables["nvtx_sum"]]
    assert got == [  # largest first, like nsys; Time (%) = share of all ranges' time
        ("", "Train step 1", 1, 1_048_170_000, 1_048_170_000, 1_048_170_000, 1_048_170_000, 62.4, "PushPop"),
        ("NCCL", "ncclAllReduce", 4, 629_690_000, 157_420_000, 60_081, 629_490_000, 37.5, "PushPop"),
        ("", "Layer 0", 2, 1_246_600, 623_300, 287_440, 959_160, 0.1, "PushPop"),
        ("", "Layer 1", 2, 601_730, 300_870, 284_910, 316_820, 0.0, "PushPop"),
    ]


def test_kernels_per_range_exact_values() -> None:
    tables, _ = parse_nvprof(TEXT, "f.log")
    nk = tables["nvtx_kern_sum"]
    assert {(r["domain"], r["range"]): 0 for r in nk}.keys() == {
        ("NCCL", "ncclAllReduce"), ("", "Layer 0"), ("", "Layer 1"), ("", "Train step 1")}
    assert [sum(r["range"] == rng for r in nk) for rng in ("ncclAllReduce", "Layer 0", "Layer 1", "Train step 1")] \
        == [1, 10, 10, 16]
    nccl = next(r for r in nk if r["range"] == "ncclAllReduce")
    assert nccl == {"domain": "NCCL", "range": "ncclAllReduce", "style": "PushPop", "nvtx_inst": 4, "kern_inst": 4,
                    "total_time_ns": 67_776, "avg_ns": 16_944, "min_ns": 15_872, "max_ns": 19_360,
                    "name": NCCL_KERNEL}
    assert _kernels(tables, "Layer 0") == [  # the first row and its continuation rows, largest first
        (SGEMM_TN, 8, 412_640, 51_580, 21_344, 98_815), (SGEMM_NN, 4, 187_230, 46_808, 30_112, 61_952),
        ("layernorm_backward_kernel2", 2, 61_664, 30_832, 29_856, 31_808),
        ("matmul_backward_bias_kernel4", 4, 52_415, 13_104, 9_376, 17_023),
        ("softmax_autoregressive_backward_kernel", 1, 44_895, 44_895, 44_895, 44_895),
        ("layernorm_forward_kernel3", 2, 18_432, 9_216, 9_088, 9_344),
        ("softmax_forward_kernel5", 1, 15_264, 15_264, 15_264, 15_264),
        ("gelu_backward_kernel", 1, 11_616, 11_616, 11_616, 11_616),
        ("residual_forward_kernel", 2, 10_239, 5_120, 5_056, 5_183),
        ("gelu_forward_kernel2", 1, 8_928, 8_928, 8_928, 8_928),
    ]
    assert {r["nvtx_inst"] for r in nk if r["range"] == "Layer 1"} == {2}
    step = _kernels(tables, "Train step 1")
    assert step[0] == (SGEMM_TN, 18, 2_194_400, 121_910, 21_216, 759_330)  # 2.1944ms, 121.91us, 759.33us
    assert step[-1] == ("encoder_forward_kernel3", 1, 6_848, 6_848, 6_848, 6_848)
    assert ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", 4, 67_776, 16_944, 15_872, 19_360) in step
    # kernels only, as nsys's nvtx_kern_sum: API calls inside a range have no table
    assert not any(r["name"].startswith(("cuda", "[CUDA")) for r in nk)


def test_range_kernels_feed_the_analyses() -> None:
    tables, _ = parse_nvprof(TEXT, "f.log")
    top = top_kernels(tables, "Layer 0", n=2)
    assert top.total_ns == 823_323 and [k.name for k in top.kernels] == [SGEMM_TN, SGEMM_NN]


def test_nvtx_section_leaves_the_summary_as_without_it() -> None:
    without = "".join(LINES[:NVTX_LINE - 1])
    t_without, w_without = parse_nvprof(without, "f.log")
    t_with, _ = parse_nvprof(TEXT, "f.log")
    assert set(t_without) == set(SUMMARY) and w_without == []
    assert {k: t_with[k] for k in SUMMARY} == t_without
    kern = t_without["cuda_gpu_kern_sum"]
    assert (kern[0]["name"], kern[0]["instances"], kern[0]["total_time_ns"]) == (SGEMM_TN, 18, 2_194_400)
    assert t_without["cuda_gpu_mem_time_sum"][0]["operation"] == "[CUDA memcpy Host-to-Device]"
    api = {r["name"]: r for r in t_without["cuda_api_sum"]}
    assert api["cudaLaunchKernelExC"]["total_time_ns"] == 629_440_000 and api["cuDeviceGetAttribute"]["min_ns"] == 101


def test_warning_before_the_nvtx_result_line_also_works() -> None:
    swapped = TEXT.replace("==31337== NVTX result:\n==31337== Warning: Found 1 invalid range marker(s)\n",
                           "==31337== Warning: Found 1 invalid range marker(s)\n==31337== NVTX result:\n")
    assert swapped != TEXT
    tables, warnings = parse_nvprof(swapped, "f.log")
    assert tables == parse_nvprof(TEXT, "f.log")[0]
    assert warnings == ["f.log:34: nvprof Warning: Found 1 invalid range marker(s)"]


@pytest.mark.parametrize("cut_after,line,what", [
    (36, 36, "NVTX thread has no Domain"),
    (44, 44, "NVTX domain '<unnamed>' has no Range"),
    (61, 60, "NVTX range 'Layer 1' has no `Range:` row"),  # cut after its Type header line
])
def test_truncated_nvtx_section_warns_at_the_cut_and_keeps_the_rest(tmp_path: Path, cut_after: int, line: int,
                                                                    what: str) -> None:
    path = tmp_path / "cut.log"
    path.write_text("".join(LINES[:cut_after]))
    tables, warnings = load_profile(path)
    assert warnings[1:] == [f"{path}:{line}: {what} (NVTX section truncated?); nothing of it loaded"]
    assert all(tables[k] for k in SUMMARY)
    full, _ = parse_nvprof(TEXT, "f.log")
    assert tables["cuda_gpu_kern_sum"] == full["cuda_gpu_kern_sum"]


def test_cut_mid_row_names_the_line_and_keeps_the_ranges_before(tmp_path: Path) -> None:
    path = tmp_path / "cut.log"
    path.write_text(TEXT[:TEXT.index("1.2466ms") + 4])  # inside the "Layer 0" Range: row (line 47)
    tables, warnings = load_profile(path)
    assert warnings[1].startswith(f"{path}:47: not an nvprof result row; rest of the NVTX range 'Layer 0' skipped")
    assert warnings[2] == f"{path}:47: no newline at end of file; the last row may be truncated"
    assert [r["range"] for r in tables["nvtx_sum"]] == ["ncclAllReduce"]
    assert [r["range"] for r in tables["nvtx_kern_sum"]] == ["ncclAllReduce"]


def test_bad_value_in_a_range_skips_that_range_only() -> None:
    bad = TEXT.replace("187.23us         4  46.808us", "187.23xs         4  46.808us")  # Layer 0, line 49
    tables, warnings = parse_nvprof(bad, "bad.log")
    assert warnings[1] == ("bad.log:49: not a time with unit s/ms/us/ns: '187.23xs'; "
                           "rest of the NVTX range 'Layer 0' skipped")
    assert len(warnings) == 2
    assert [k[0] for k in _kernels(tables, "Layer 0")] == [SGEMM_TN]  # the row before the bad one
    assert len(_kernels(tables, "Layer 1")) == 10 and len(_kernels(tables, "Train step 1")) == 16
    assert {r["range"] for r in tables["nvtx_sum"]} == {"ncclAllReduce", "Layer 0", "Layer 1", "Train step 1"}


def test_400_digit_time_is_a_located_warning_not_an_overflow() -> None:
    big = "1" * 400 + "ms"
    in_range = TEXT.replace(" GPU activities:  100.00%  67.776us", f" GPU activities:  100.00%  {big}")  # line 41
    tables, warnings = parse_nvprof(in_range, "big.log")
    assert warnings[1] == ("big.log:41: time out of range (beyond int64 ns): '11111111111111111111...111111ms "
                           "(402 chars)'; rest of the NVTX range 'ncclAllReduce' skipped")
    assert "ncclAllReduce" not in {r["range"] for r in tables["nvtx_kern_sum"]} and len(tables["nvtx_sum"]) == 4
    in_summary = TEXT.replace("  0.49%  67.776us", f"  0.49%  {big}")  # line 13
    tables, warnings = parse_nvprof(in_summary, "big.log")
    assert warnings[0].startswith("big.log:13: time out of range") and "summary section skipped" in warnings[0]
    assert len(tables["cuda_gpu_kern_sum"]) == 7 and "cuda_api_sum" not in tables  # rows before it only
    assert len(tables["nvtx_kern_sum"]) == 37  # the NVTX section is another section: it still loads


def _cuts_in_every_line(start: int) -> list[int]:
    """Where a log cut short can end inside each line from `start` on: at its start, after its first character,
    at its middle, before its last character and before its newline."""
    cuts, at = set(), start
    for line in TEXT[start:].splitlines(keepends=True):
        n = len(line)
        cuts.update(at + k for k in (0, 1, n // 2, max(0, n - 2), max(0, n - 1)))
        at += n
    return sorted(cuts)


def test_every_cut_inside_the_nvtx_section_is_survivable() -> None:
    start = TEXT.index("==31337== NVTX result:")
    cuts = _cuts_in_every_line(start)
    assert len(cuts) > 3 * TEXT[start:].count("\n")
    for cut in cuts:
        tables, warnings = parse_nvprof(TEXT[:cut], "c.log")
        assert all(w.startswith("c.log:") for w in warnings)
        assert len(tables["cuda_gpu_kern_sum"]) == 16 and len(tables["cuda_api_sum"]) == 9


def test_rows_before_any_range_header_are_reported() -> None:
    text = "".join(LINES[:NVTX_LINE + 3]) + "".join(LINES[NVTX_LINE + 4:])  # drop `Range "ncclAllReduce"`
    tables, warnings = parse_nvprof(text, "f.log")
    assert warnings[1] == ("f.log:39: NVTX result row outside any Range block; "
                           "NVTX rows skipped up to the next Range line")
    assert "ncclAllReduce" not in {r["range"] for r in tables["nvtx_sum"]}
    assert len(tables["nvtx_sum"]) == 3


def test_rows_of_unmapped_sections_are_not_malformed() -> None:
    acc = "  OpenACC (excl):   80.00%  1.0000ms        10  100.00us  90.000us  110.00us  acc_wait@main.c:42\n"
    text = TEXT.replace("\n\n==31337== NVTX result:", "\n" + acc + "\n==31337== NVTX result:")
    assert text != TEXT
    tables, warnings = parse_nvprof(text, "f.log")
    assert tables == parse_nvprof(TEXT, "f.log")[0] and len(warnings) == 1

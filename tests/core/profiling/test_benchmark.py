"""A 100,000-row kernel CSV parses at a small multiple of reading it with csv.DictReader (best of 3 each,
interleaved): 2.0x on an idle 2-core machine (0.75-0.76 s against 0.32-0.38 s). The ratio, not a time in
seconds, is held: the same test took 2.5 s with three other suites beside it. Each side is this process's own
CPU time, not the wall clock: in a loaded CI run the wall-clock ratio reached 4.4x (2.64 s against 0.60 s),
as other processes took the cores from one side more than from the other."""
from __future__ import annotations

import csv
import random
import time
from pathlib import Path

from perfconsole.core.profiling.load import load_profile

ROWS = 100_000
HEADER = "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name\n"


def test_100k_row_kernel_csv_parses_at_a_small_multiple_of_reading_it(tmp_path: Path) -> None:
    rng = random.Random(0)
    path = tmp_path / "big_cuda_gpu_kern_sum.csv"
    lines = [HEADER]
    total = 10**12
    for i in range(ROWS):
        n = rng.randint(1, 5000)
        name = (f'"void at::native::vectorized_elementwise_kernel<(int)4, Functor{i}<float>, std::array<char *, 3>>'
                f'(int, T2, T3)"' if i % 3 else f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_{i}")
        lines.append(f"0.0,{total - i},{n},{(total - i) / n:.1f},{1000 + i}.5,{i},{total - i},123456.7,{name}\n")
    path.write_text("".join(lines))
    best = plain = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        tables, warnings = load_profile(path)
        t1 = time.process_time()
        with open(path, newline="") as f:
            read = list(csv.DictReader(f))
        best, plain = min(best, t1 - t0), min(plain, time.process_time() - t1)
    rows = tables["cuda_gpu_kern_sum"]
    assert len(rows) == ROWS == len(read) and warnings == []
    assert rows[1]["total_time_ns"] == total - 1 and rows[1]["name"].startswith("void at::native::")
    print(f"100k-row kernel CSV: best of 3 = {best:.3f} CPU-s, csv.DictReader {plain:.3f} CPU-s ({best / plain:.2f}x)")
    assert best / plain < 4.0

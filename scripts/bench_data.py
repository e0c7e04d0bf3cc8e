"""The large nsys stats CSVs the import benchmark reads (scripts/bench_import.py), made from real output.

`kern_sum_csv`: a `cuda_gpu_kern_sum` CSV of N rows. Its header is the ≥2022 one of the real fixtures
(tests/fixtures/nsys, FORMATS.md §2.1); its kernel names are those of every real kernel-summary fixture
in turn (639 names, 116 characters on average, up to 3,733), each made unique with `_<row>` at its end
as a summary's names are (or `_<row in letters>`: `_a`, `_b`, ... `_bmdq`); its values keep the fixtures' shapes: integer totals, counts, Min and Max,
one decimal on Avg, Med and StdDev and on Time (%), rows sorted by total, largest first.

`gpu_trace_csv`: a `cuda_gpu_trace` CSV of N rows. No fixture holds that report; its header is the one
nsys 2024-2026 prints (`... Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name`), as in
public projects' tests. Kernel rows carry the fixtures' kernel names and their grid, block, register
and shared-memory columns; one row in 20 is a memcpy or memset with those columns empty and bytes and
throughput filled in, as nsys writes them.
"""
from __future__ import annotations

import csv
import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
KERN_HEADER = "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name"
TRACE_HEADER = ("Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),"
                "DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name")
MEMOPS = (("[CUDA memcpy Host-to-Device]", "Pinned", "Device"), ("[CUDA memcpy Device-to-Host]", "Device", "Pinned"),
          ("[CUDA memcpy Device-to-Device]", "Device", "Device"), ("[CUDA memset]", "Device", ""))


def fixture_kernels() -> list[tuple[str, float]]:
    """(name, average ns) of every row of every real kernel-summary fixture."""
    out = []
    for path in sorted(FIXTURES.glob("nsys*/**/*.csv")):
        with path.open(newline="") as f:
            rows = list(csv.reader(f))
        head = rows[0]
        if head[-1] != "Name" or "Instances" not in head:
            continue
        avg = next(i for i, h in enumerate(head) if h in ("Avg (ns)", "Average"))
        out += [(r[-1], float(r[avg])) for r in rows[1:]]
    return out


def _field(name: str) -> str:
    return f'"{name}"' if "," in name or '"' in name else name  # nsys quotes a name only when it must


def _letters(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, 26)
        out = chr(97 + r) + out
        if not i:
            return out


def kern_sum_csv(path: Path, rows: int, seed: int = 0, unique_by: str = "digits") -> Path:
    """`unique_by`: what makes each name unique, `_<row>` (digits) or `_<row in letters>` (letters: a
    name no digit skeleton folds into another's, the worst case for categorising a million of them)."""
    rng = random.Random(seed)
    kernels = fixture_kernels()
    body = []
    for i in range(rows):
        name, avg = kernels[i % len(kernels)]
        n = max(1, int(10 ** rng.uniform(0, 5)))
        avg = max(1.0, avg * rng.uniform(0.5, 1.5))
        lo, hi = int(avg * rng.uniform(0.3, 1.0)), int(avg * rng.uniform(1.0, 4.0)) + 1
        if n == 1:
            lo = hi = int(avg)
            avg = float(lo)
        total = round(avg * n)
        med = min(max(avg * rng.uniform(0.8, 1.1), lo), hi)
        std = 0.0 if n == 1 else avg * rng.uniform(0.0, 0.5)
        body.append((total, n, avg, med, lo, hi, std, f"{name}_{i if unique_by == 'digits' else _letters(i)}"))
    body.sort(key=lambda r: -r[0])
    grand = sum(r[0] for r in body) or 1
    with path.open("w", newline="\n") as f:
        f.write(KERN_HEADER + "\n")
        f.writelines(f"{100 * t / grand:.1f},{t},{n},{avg:.1f},{med:.1f},{lo},{hi},{std:.1f},{_field(name)}\n"
                     for t, n, avg, med, lo, hi, std, name in body)
    return path


def gpu_trace_csv(path: Path, rows: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    kernels = fixture_kernels()
    device = "NVIDIA H100 80GB HBM3 (0)"
    start, corr = 1_134_711_990, 123
    with path.open("w", newline="\n") as f:
        f.write(TRACE_HEADER + "\n")
        for i in range(rows):
            corr += rng.randint(1, 4)
            if i % 20 == 19:
                op, src, dst = MEMOPS[rng.randrange(len(MEMOPS))]
                mb = rng.choice((0.004, 0.262, 4.194, 67.109))
                dur = max(800, int(mb / rng.uniform(3e3, 2e5) * 1e9))  # MB at 3-200 GB/s
                f.write(f"{start},{dur},{corr},,,,,,,,,,{mb:.3f},{mb * 1e9 / dur:.3f},{src},{dst},{device},1,,7,{op}\n")
            else:
                name, avg = kernels[rng.randrange(len(kernels))]
                dur = max(1000, int(avg * rng.uniform(0.7, 1.3)))
                grid = rng.choice((1, 8, 132, 264, 1024, 4096))
                block = rng.choice((128, 256, 384, 512))
                f.write(f"{start},{dur},{corr},{grid},1,1,{block},1,1,{rng.choice((32, 64, 128, 168))},0.000,"
                        f"{rng.choice((0.0, 0.049, 0.229)):.3f},,,,,{device},1,,7,{_field(name)}\n")
            start += dur + rng.randint(200, 5000)
    return path

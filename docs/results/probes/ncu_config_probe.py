"""Which name ncu's `--filter-mode per-launch-config` tells launch configurations apart by.

Child (`--child`): one range (cudaProfilerStart/Stop) that launches three instantiations of
`vectorized_elementwise_kernel` on tensors of one size (fill, multiply, square): one grid and one block between them.
Parent: the child under ncu once per `--kernel-name-base`, filtering `regex:vectorized_elementwise_kernel`,
`--filter-mode per-launch-config --launch-count 1`, and prints the kernels each profiled.
"""
from __future__ import annotations

import csv
import io
import subprocess
import sys


def child() -> None:
    import torch
    n = 1 << 22
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    a.fill_(1.0)
    c = a * b
    d = c.pow(2)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("child done", float(d.sum()))


def main() -> None:
    sys.path.insert(0, ".")
    from perfconsole.core.launch.ncu import find_ncu
    ncu = find_ncu()
    print("ncu:", ncu)
    for base in ("function", "demangled", "mangled"):
        cmd = [ncu, "--profile-from-start", "off", "--kernel-name-base", base,
               "--kernel-name", "regex:vectorized_elementwise_kernel", "--filter-mode", "per-launch-config",
               "--launch-skip", "0", "--launch-count", "1", "--section", "LaunchStats", "--csv",
               "--page", "details", sys.executable, __file__, "--child"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('"')]
        launches: dict[str, dict[str, str]] = {}
        for row in csv.DictReader(io.StringIO("\n".join(lines))):
            one = launches.setdefault(row.get("ID", "?"), {"name": row.get("Kernel Name", "")})
            if row.get("Metric Name") in ("Grid Size", "Block Size"):
                one[row["Metric Name"]] = row.get("Metric Value", "")
        print(f"== kernel-name-base {base}: rc {proc.returncode}, {len(launches)} launches profiled")
        for lid, one in launches.items():
            print("   ", lid, "grid", one.get("Grid Size"), "block", one.get("Block Size"), one["name"][:110])
        if proc.returncode:
            print(proc.stderr[-2000:])


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()

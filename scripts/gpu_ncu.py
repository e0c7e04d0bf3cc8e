"""One device call for Nsight Compute (docs/results/ncu_why_h100.md): capture the ncu fixtures of
tests/fixtures/ncu (its capture.py under ncu, the report's details and raw pages), run the `--profile ncu` GPU
test (tests/core/launch/test_ncu_gpu.py), and print `perfconsole kernels --why` of that run. From the repository
root on the GPU machine:

    source scripts/device_env.sh && python3 scripts/gpu_ncu.py [--no-fixtures]

(--no-fixtures: the test and the table only. --small-report: only a small report for tests/fixtures/ncu, one
launch of capture.py's compiled SiLU-and-add (a Triton kernel: its module is small, where an eager elementwise
kernel's report carries torch's whole module, 5.8 MB) with the SpeedOfLight section, `small.ncu-rep`, and its
details page as ncu reads it back, `small_details.csv`; the one .ncu-rep that leaves the machine, kept under
SMALL_REP_MAX bytes.)
Everything lands in $OUT/ncu_bundle.tgz (and the short table on stdout).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from perfconsole.core.launch import ncu as tool
from perfconsole.core.launch.processes import run_to_end

OUT = Path(os.environ.get("OUT") or "out-ncu")
WORK = Path("/tmp/ncu-evidence")  # bundled into $OUT at the end; log.txt and pytest.log are written to $OUT as they grow
REP = Path("/tmp/ncu-fixture/fixture")
PYTEST_TIMEOUT_S = 170
SMALL_REP_MAX = 1 << 20  # a fixture committed to the repository


class Log(list):
    """Lines kept, and written to $OUT/log.txt as they come: a call cut short still brings them back."""

    def append(self, line: str) -> None:
        super().append(line)
        (OUT / "log.txt").write_text("\n".join(self) + "\n")


def run(argv: list[str], timeout: float, **kw) -> tuple[int | str, str, str]:
    """argv in a process group of its own, the whole group killed after `timeout` (nothing left running)."""
    try:
        proc = subprocess.Popen(argv, text=True, start_new_session=True, **kw)
    except OSError as exc:
        return "not run", "", str(exc)
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out or "", err or ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return "timeout", out or "", err or ""


def sh(argv: list[str], path: Path | None = None, timeout: float = 120) -> str:
    code, out, err = run(argv, timeout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if path is not None:
        path.write_text(out, encoding="utf-8")
    return out + (f"\n[stderr]\n{err}" if err.strip() else "") + f"\n[exit {code}]\n"


def fixtures(ncu: str, log: list[str]) -> None:
    names = tool.device_metric_names(ncu, run_to_end)
    metrics = tool.metrics_to_ask(names)
    query = sh([ncu, "--query-metrics"])
    keep = [ln for ln in query.splitlines() if any(w in ln for w in ("ops_path_tensor", "pipe_tensor", "sass_thread_inst",
                                                                      "dram__bytes", "Device"))]
    log.append("query-metrics (tensor, sass, dram lines):\n" + "\n".join(keep[:80]))
    log.append(f"device metrics: {len(names)}; asked: {','.join(metrics)}")
    REP.parent.mkdir(parents=True, exist_ok=True)
    cmd = [ncu, "--profile-from-start", "off", "--target-processes", "application-only", "--filter-mode",
           "per-launch-config", "--launch-count", "1", "--clock-control", "none"]
    for s in tool.SECTIONS:
        cmd += ["--section", s]
    cmd += ["--metrics", ",".join(metrics), "--log-file", str(WORK / "fixture_ncu.log"), "--export", str(REP),
            "--force-overwrite", sys.executable, "tests/fixtures/ncu/capture.py"]
    log.append("fixture command: " + " ".join(cmd))
    t = time.time()
    log.append(sh(cmd, timeout=100)[-2000:])
    rep = REP.with_suffix(".ncu-rep")
    log.append(f"fixture capture {time.time() - t:.1f} s; report {rep.stat().st_size if rep.exists() else 0} bytes")
    for name, extra in (("details.csv", ["--page", "details"]), ("raw.csv", ["--page", "raw"]),
                        ("details_base_units.csv", ["--page", "details", "--print-units", "base"])):
        log.append(name + ": " + sh([ncu, "--import", str(rep), "--csv", *extra, "--print-kernel-base", "demangled"],
                                    WORK / name)[-300:])


def small_report(ncu: str, log: list[str]) -> None:
    """tests/fixtures/ncu/small.ncu-rep: one launch of capture.py's Triton kernel, SpeedOfLight only, and its
    details page read back by ncu (what `perfconsole import` of the report gives where ncu is found)."""
    rep = WORK / "small"
    cmd = [ncu, "--profile-from-start", "off", "--target-processes", "application-only", "--kernel-name",
           "regex:triton_poi", "--launch-count", "1", "--clock-control", "none", "--section", "SpeedOfLight",
           "--export", str(rep), "--force-overwrite", sys.executable, "tests/fixtures/ncu/capture.py"]
    log.append("small report command: " + " ".join(cmd))
    log.append(sh(cmd, timeout=100)[-1500:])
    made = rep.with_suffix(".ncu-rep")
    size = made.stat().st_size if made.exists() else 0
    log.append(f"small report: {size} bytes")
    if size > SMALL_REP_MAX:
        made.rename(made.with_suffix(".too-large"))  # not bundled: a fixture that size does not belong in git
        log.append(f"small report over {SMALL_REP_MAX} bytes: not kept")
        return
    log.append("small_details.csv: " + sh([ncu, "--import", str(made), "--csv", "--page", "details",
                                           "--print-kernel-base", "demangled"], WORK / "small_details.csv")[-300:])


def summary(log: list[str]) -> None:
    from perfconsole.core.profiling.ncu_csv import read_pages
    from perfconsole.core.profiling.ncu_kernels import launch_frame

    try:
        pages = read_pages((WORK / "details.csv").read_text(), (WORK / "raw.csv").read_text())
        f = launch_frame(pages)
        for _, r in f.iterrows():
            tf = r["flops"] / r["duration_s"] / 1e12 if r["duration_s"] else float("nan")
            log.append(f"{r['duration_s'] * 1e6:9.1f} us  SM {r['compute_pct']:5.1f}%  mem {r['memory_pct']:5.1f}%  "
                       f"{tf:7.1f} TFLOP/s ({r['flops_source']})  sass-only {r['ncu_roofline_flops']:.3g}  "
                       f"rule {r['rule']} {r['rule_speedup_pct']}  {r['kernel'][:70]}")
    except Exception as exc:  # the evidence is still bundled: the reader is fixed on the CPU from it
        log.append(f"fixture summary failed: {exc!r}")


def main() -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    OUT.mkdir(parents=True, exist_ok=True)
    log = Log()
    log.append(sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"]))
    ncu = tool.find_ncu()
    log.append(f"ncu: {ncu} {sh([ncu, '--version']) if ncu else ''}")
    if "--small-report" in sys.argv:
        if not ncu:
            print("\n".join(log) + "\nno ncu found: no report")
            return 1
        small_report(ncu, log)
        with tarfile.open(OUT / "ncu_bundle.tgz", "w:gz") as tar:
            for p in sorted(WORK.glob("small*")):
                if p.suffix in (".ncu-rep", ".csv"):
                    tar.add(p, arcname=p.name)
        print("\n".join(log)[-11000:])
        return 0
    if ncu and "--no-fixtures" not in sys.argv:
        fixtures(ncu, log)
        summary(log)
    env = {**os.environ, "PERFCONSOLE_EVIDENCE_DIR": str(WORK)}
    t = time.time()
    with (OUT / "pytest.log").open("w") as f:
        code = run([sys.executable, "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "-s", "-rA",
                    "tests/core/launch/test_ncu_gpu.py"], PYTEST_TIMEOUT_S, stdout=f, stderr=subprocess.STDOUT,
                   env=env)[0]
    log.append(f"pytest exit {code} in {time.time() - t:.0f} s")
    log.append("\n".join((OUT / "pytest.log").read_text().splitlines()[-30:]))
    if (WORK / "ncu_run.json").exists():
        log.append(sh([sys.executable, "-m", "perfconsole.core.cli.main", "kernels", str(WORK / "ncu_run.json"),
                       "--why"], WORK / "why.txt"))
    with tarfile.open(OUT / "ncu_bundle.tgz", "w:gz") as tar:
        for p in sorted(WORK.iterdir()):
            if p.is_file() and p.suffix != ".ncu-rep":
                tar.add(p, arcname=p.name)
    print("\n".join(log)[-11000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

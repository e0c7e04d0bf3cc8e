"""Import speed: a million-row kernel summary through `perfconsole import`, and large tables in the console.

    python scripts/bench_import.py [--rows 1000000] [--trace-rows 100000] [--repeat 3]
                                   [--before REV] [--before-repeat 1] [--limit 900] [--console-limit 300]
                                   [--names digits|letters] [--data DIR] [--out FILE.json]

Measured, each in a fresh process, for this checkout ("after") and, with --before, for the code at REV
(extracted with `git archive` and run from there, "before"):

- `perfconsole import big_cuda_gpu_kern_sum.csv`, its top-20 table printed (to a file: the plain form):
  wall time from spawning it to its exit, and its peak RSS;
- `perfconsole import big_cuda_gpu_kern_sum.csv --json` to a file: wall time, peak RSS, and a SHA-256 of
  the JSON (equal digests: the two versions wrote the same bytes);
- the console (headless, 120x34): a file opened with its import action until the Kernels table shows
  its rows, then `s` on the "total ms" column and on the "kernel" column, each until the table is drawn
  again: for a cuda_gpu_trace of --trace-rows rows and for the million-row summary.

The CSVs are made by scripts/bench_data.py from the real fixtures' headers and value shapes (kept in
--data between runs). Each "after" figure is the median of --repeat runs, with every run listed, and
the load average (1 min) at each start: others' work on the same cores shows there. A run past --limit
seconds is stopped and reported as such.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
import bench_data  # noqa: E402

# Runs a command, hashes its stdout, and says its wall time and its peak RSS (the only child it waits for).
MEASURE = r"""
import hashlib, json, resource, subprocess, sys, time
out, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
with open(out, "wb") as f:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    h = hashlib.sha256()
    while chunk := proc.stdout.read(1 << 20):
        h.update(chunk)
        f.write(chunk) if f.tell() < (64 << 20) else None
    rc = proc.wait()
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"rc": rc, "wall_s": wall, "peak_mb": peak, "sha256": h.hexdigest()}))
"""

CONSOLE = r"""
import asyncio, json, sys, time
from pathlib import Path
from perfconsole.tui.app import PerfConsole
from perfconsole.tui.widgets.sortable_table import SortableTable

async def main(path: str, limit: float) -> dict:
    app = PerfConsole(sampler=lambda i: None)
    out = {}
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        table = app.query_one("#kernel-table", SortableTable)
        t0 = time.perf_counter()
        app.import_profile(Path(path))
        while not table.row_count:
            if time.perf_counter() - t0 > limit:
                return {"error": "no rows in the Kernels table: " + "; ".join(str(n.message) for n in app._notifications)}
            await pilot.pause(0.005)
        out["open_s"] = time.perf_counter() - t0
        out["rows"] = table.row_count
        for name, column in (("sort_total_s", 0), ("sort_name_s", len(table.cols) - 1)):
            table.move_cursor(column=column)
            await pilot.pause()
            t = time.perf_counter()
            await pilot.press("s")
            await pilot.pause()
            out[name] = time.perf_counter() - t
            out[name.replace("_s", "_first")] = str(table.get_row_at(0)[column])[:60]
    return out

print(json.dumps(asyncio.run(main(sys.argv[1], float(sys.argv[2])))))
"""


def before_tree(rev: str, where: Path) -> Path:
    """The code at `rev` as an importable `perfconsole` package under `where`; the PYTHONPATH for it."""
    src = where / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "core", "model", "tui"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = where / "pkg" / "perfconsole"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name in ("core", "model", "tui"):
        (pkg / name).symlink_to(src / name)
    return where / "pkg"


def run_measured(argv: list[str], env: dict, limit: float, out: Path) -> dict:
    t0 = time.perf_counter()
    load = os.getloadavg()[0]
    try:
        proc = subprocess.run([sys.executable, "-c", MEASURE, str(out), *argv], env=env, capture_output=True,
                              text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {limit:.0f} s", "load_1min": load}
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1], "load_1min": load}
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    got["load_1min"] = load
    got["total_s"] = time.perf_counter() - t0
    return got


def run_console(path: Path, env: dict, limit: float) -> dict:
    load = os.getloadavg()[0]
    try:
        proc = subprocess.run([sys.executable, "-c", CONSOLE, str(path), str(limit)], env=env, capture_output=True,
                              text=True, timeout=limit + 60)
    except subprocess.TimeoutExpired:
        return {"error": f"stopped after {limit:.0f} s", "load_1min": load}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1][:300], "load_1min": load}
    return {**json.loads(lines[-1]), "load_1min": load}


def version_env(pythonpath: Path | None, data_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "COLUMNS")}
    env["PERFCONSOLE_DATA_DIR"] = str(data_dir)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def measure(label: str, env: dict, big: Path, trace: Path, repeat: int, limit: float, console_limit: float,
            work: Path) -> dict:
    cli = [sys.executable, "-m", "perfconsole.tui.main", "import", str(big)]
    runs: dict[str, list[dict]] = {"top20": [], "json": [], "console_trace": [], "console_big": []}
    for i in range(repeat):
        print(f"[{label}] run {i + 1}/{repeat}", file=sys.stderr, flush=True)
        runs["top20"].append(run_measured(cli, env, limit, work / f"{label}_top20.txt"))
        runs["json"].append(run_measured([*cli, "--json"], env, limit, work / f"{label}.json"))
        runs["console_trace"].append(run_console(trace, env, console_limit))
        runs["console_big"].append(run_console(big, env, console_limit))
        print(json.dumps({k: v[-1] for k, v in runs.items()}, indent=1), file=sys.stderr, flush=True)
    return runs


def median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def machine() -> dict:
    import pandas

    try:
        import pyarrow
        arrow = pyarrow.__version__
    except ImportError:
        arrow = None
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "core", "tui", "scripts"],
                                capture_output=True, text=True).stdout.strip())
    return {"nproc": os.cpu_count(), "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(), "pandas": pandas.__version__, "pyarrow": arrow,
            "commit": commit + ("+uncommitted" if dirty else ""), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--trace-rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--before", default=None, metavar="REV", help="also measure the code at this revision")
    ap.add_argument("--before-repeat", type=int, default=1)
    ap.add_argument("--limit", type=float, default=900.0, help="seconds an import may take before it is stopped")
    ap.add_argument("--console-limit", type=float, default=300.0,
                    help="seconds the console may take to show a table before it is stopped")
    ap.add_argument("--names", choices=("digits", "letters"), default="digits",
                    help="what makes each kernel name unique: its row number (digits) or the row in letters")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "perfconsole-bench-import")
    ap.add_argument("--out", type=Path, default=None, help="write every figure here as JSON")
    args = ap.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    big = args.data / f"big{args.rows}{'' if args.names == 'digits' else '_letters'}_cuda_gpu_kern_sum.csv"
    trace = args.data / f"trace{args.trace_rows}_cuda_gpu_trace.csv"
    if not big.exists():
        bench_data.kern_sum_csv(big, args.rows, unique_by=args.names)
    if not trace.exists():
        bench_data.gpu_trace_csv(trace, args.trace_rows)
    result = {"machine": machine(), "files": {str(p.name): p.stat().st_size for p in (big, trace)},
              "command": " ".join(["python", "scripts/bench_import.py", *sys.argv[1:]]), "versions": {}}
    with tempfile.TemporaryDirectory(prefix="perfconsole-bench-import-") as tmp:
        work = Path(tmp)
        if args.before:
            path = before_tree(args.before, work / "before")
            result["versions"][f"before ({args.before})"] = measure(
                "before", version_env(path, work / "data-before"), big, trace, args.before_repeat, args.limit,
                args.console_limit, work)
        result["versions"]["after"] = measure("after", version_env(None, work / "data-after"), big, trace,
                                              args.repeat, args.limit, args.console_limit, work)
        shutil.rmtree(work, ignore_errors=True)
    for name, runs in result["versions"].items():
        print(f"\n{name}")
        for what, key in (("top20", "wall_s"), ("top20", "peak_mb"), ("json", "wall_s"), ("json", "peak_mb"),
                          ("console_trace", "open_s"), ("console_trace", "sort_total_s"),
                          ("console_trace", "sort_name_s"), ("console_big", "open_s"),
                          ("console_big", "sort_total_s"), ("console_big", "sort_name_s")):
            values = [r.get(key, r.get("error")) for r in runs[what]]
            print(f"  {what:14s} {key:13s} median {median(runs[what], key)}  runs {values}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

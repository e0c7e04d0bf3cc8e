"""What `perfconsole run` (tiny, CPU, defaults) costs beyond its steps: wall time minus the steps' own time,
on an empty data folder (peaks and FLOP counts not yet cached) and on a warm one; and the time in front of
the first step (from the start to the first step's progress line, less that step's own time).

Each run is `perfconsole run --size tiny --device cpu --json`, timed from its start to its exit; the steps'
own time is the sum of `total_ms` over the warm-up and measured steps of the run's JSON. Runs are interleaved
(every tree's empty and warm run in each round), so a load that comes and goes on a shared machine falls on
all alike; `import torch` in a process of its own is timed in each round too, since every cold worker pays
it before its first step. With `--tree NAME=DIR` the runs use the perfconsole of another source tree (a
`git archive` of an earlier commit, say), put first on PYTHONPATH through a folder of links; the console
script is this interpreter's. With `--beside-console` each round also runs both folders with a console's warm
process up (started as a console starts it, from this process, its pointer in the run's data folder, and ready
before the run is timed): the path a command takes while a console or server is open, which forks the worker
from a process that has imported torch (the record's `environment.start` says which start each run had).

Python's bytecode: every process of the benchmark may write and read compiled modules (under a folder of the
benchmark's own, PYTHONPYCACHEPREFIX, filled by the untimed first run), as on a machine where perfconsole was
installed by pip, which compiles them; `--no-bytecode` keeps PYTHONDONTWRITEBYTECODE as the environment has it,
so where it is set each process compiles perfconsole's modules from source again (the earlier sections of
docs/results/first_run.md ran so).

    .venv/bin/python scripts/bench_first_run.py --rounds 5 --tree before=/tmp/before --tree after=.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMAND = ["run", "--size", "tiny", "--device", "cpu", "--json"]


def shim(tree: Path, into: Path) -> dict[str, str]:
    """The environment that makes `perfconsole` import from `tree`: a package of links to its three folders."""
    pkg = into / "perfconsole"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name in ("core", "model", "tui"):
        (pkg / name).symlink_to(tree.resolve() / name)
    return {"PYTHONPATH": str(into)}


def one_run(env: dict[str, str], data: Path, command: list[str] = COMMAND) -> dict[str, float]:
    """One `perfconsole run` (its arguments `command`, with `--json`) on the data folder `data`, timed."""
    script = Path(sys.executable).with_name("perfconsole")
    argv = [str(script), *command] if script.exists() else [sys.executable, "-m", "perfconsole.tui.main", *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    first_step = first_measured = None
    with tempfile.TemporaryFile("w+") as stdout, subprocess.Popen(
            argv, stdout=stdout, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **env, "PERFCONSOLE_DATA_DIR": str(data)}) as proc:
        said = []
        for line in proc.stderr:  # the progress lines, as they come: the first step's is "warm-up 1/5: ..."
            if first_step is None and "warm-up 1/" in line:
                first_step = time.perf_counter() - t0
            if first_measured is None and line.lstrip().startswith("step 1/"):
                first_measured = time.perf_counter() - t0
            said.append(line)
        code = proc.wait(timeout=600)
        stdout.seek(0)
        text = stdout.read()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the CLI's, and its worker's, which it waited for
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if code != 0:
        raise SystemExit(f"perfconsole run failed ({code}): {''.join(said)[-400:]}")
    doc = json.loads(text)["data"]
    # The first step's line is printed when the step has ended: its own time is not in front of it.
    first_step = first_step - doc["warmup_steps"][0]["total_ms"] / 1e3 if first_step is not None else float("nan")
    steps_s = sum(s["total_ms"] for s in [*doc["warmup_steps"], *doc["steps"]]) / 1e3
    peaks = doc.get("peaks") or {}
    return {"wall_s": wall, "steps_s": steps_s, "overhead_s": wall - steps_s, "cpu_s": cpu, "before_first_step_s": first_step,
            "first_measured_step_s": first_measured if first_measured is not None else float("nan"),
            "peaks": peaks.get("source", "none"), "flops_cached": (doc.get("model") or {}).get("cached"),
            "start": (doc.get("environment") or {}).get("start") or "cold",
            "phases": doc.get("start") or {}, "compile_cache": doc.get("compile_cache")}


def beside_console(env: dict[str, str], data: Path, command: list[str] = COMMAND) -> dict[str, float]:
    """One run while a console's warm process is up for `data` (started here as a console starts it, ready
    before the run's clock starts, stopped after)."""
    from perfconsole.core.launch.warm import WarmProcess

    before = os.environ.get("PERFCONSOLE_DATA_DIR")
    os.environ["PERFCONSOLE_DATA_DIR"] = str(data)  # the pointer file goes under the run's data folder
    try:
        warm = WarmProcess()
        warm.start()
    finally:
        if before is None:
            del os.environ["PERFCONSOLE_DATA_DIR"]
        else:
            os.environ["PERFCONSOLE_DATA_DIR"] = before
    try:
        why = warm.wait_ready()
        if why is not None:
            raise SystemExit(f"the warm process did not start: {why}")
        result = one_run(env, data, command)
    finally:
        warm.stop()
    if result["start"] != "warm":
        raise SystemExit(f"a run beside a console started {result['start']!r}, not warm")
    return result


def torch_import_s() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch"], check=True, timeout=300)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tree", action="append", default=[], metavar="NAME=DIR",
                   help="a source tree to run (default: this checkout, as installed)")
    p.add_argument("--json", default=None, metavar="FILE", help="every run's figures, as JSON")
    p.add_argument("--no-bytecode", action="store_true",
                   help="leave PYTHONDONTWRITEBYTECODE as it is (where set, every process compiles from source)")
    p.add_argument("--beside-console", action="store_true",
                   help="also run each folder with a console's warm process up (this checkout only)")
    args = p.parse_args(argv)
    if args.beside_console and args.tree:
        p.error("--beside-console measures this checkout's warm process: leave out --tree")
    starts = ("cold", "beside a console") if args.beside_console else ("cold",)
    work = Path(tempfile.mkdtemp(prefix="bench-first-run-"))
    if not args.no_bytecode:  # inherited by every process below: the CLI, its workers, the warm process
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    print(f"bytecode: {'as the environment has it' if args.no_bytecode else 'written and read (PYTHONPYCACHEPREFIX)'}; "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}")
    trees: dict[str, dict[str, str]] = {}
    for item in args.tree or ["this=."]:
        name, _, folder = item.partition("=")
        trees[name] = shim(Path(folder), work / "shim" / name) if item != "this=." else {}
    warm = {name: work / "warm" / name for name in trees}
    for name, env in trees.items():  # one untimed run fills each warm folder (peaks, FLOP counts)
        one_run(env, warm[name])
    runs: list[dict] = []
    imports: list[float] = []
    for r in range(args.rounds):
        imports.append(torch_import_s())
        for name, env in trees.items():
            for folder, how in ((f, h) for f in ("empty", "warm") for h in starts):
                data = Path(tempfile.mkdtemp(dir=work)) if folder == "empty" else warm[name]
                timed = one_run(env, data) if how == "cold" else beside_console(env, data)
                runs.append({"tree": name, "folder": folder, "how": how, "round": r, **timed})
                print(f"round {r + 1}: {name} {folder} {how}: wall {runs[-1]['wall_s']:.2f} s, steps "
                      f"{runs[-1]['steps_s']:.2f} s, beyond them {runs[-1]['overhead_s']:.2f} s, before the first "
                      f"{runs[-1]['before_first_step_s']:.2f} s "
                      f"(peaks {runs[-1]['peaks']})", file=sys.stderr)
    print(f"\n`import torch` alone: median {statistics.median(imports):.2f} s over {len(imports)} processes\n")
    print("| tree | data folder | start | runs | wall − steps, median (min–max) | before the first step, median (min–max) "
          "| wall, median | steps, median | CPU time of its processes, median | peaks |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in trees:
        for folder, how in ((f, h) for f in ("empty", "warm") for h in starts):
            rs = [x for x in runs if x["tree"] == name and x["folder"] == folder and x["how"] == how]
            over = [x["overhead_s"] for x in rs]
            first = [x["before_first_step_s"] for x in rs]
            # a worker forked from the warm process is no child of the command: getrusage cannot count it
            cpu = f"{statistics.median(x['cpu_s'] for x in rs):.2f} s" if how == "cold" else "not counted"
            print(f"| {name} | {folder} | {how} | {len(rs)} | {statistics.median(over):.2f} s ({min(over):.2f}–{max(over):.2f}) "
                  f"| {statistics.median(first):.2f} s ({min(first):.2f}–{max(first):.2f}) "
                  f"| {statistics.median(x['wall_s'] for x in rs):.2f} s | {statistics.median(x['steps_s'] for x in rs):.2f} s "
                  f"| {cpu} "
                  f"| {', '.join(sorted({x['peaks'] for x in rs}))} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"torch_import_s": imports, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The GPU loop's targets, each beside its cold figure in one call: how soon a run on a GPU reaches its steps.

    source scripts/device_env.sh && python3 scripts/bench_gpu_loop.py --rounds 3 --json $OUT/loop.json
    source scripts/device_env.sh && python3 scripts/bench_gpu_loop.py --ladder-only --ladder-runs 1 --work /tmp/loop \
        --json $OUT/ladder.json        # once a call, twice on the same warm machine: the first run takes ~8 min
    .venv/bin/python scripts/bench_gpu_loop.py --device cpu --size tiny --precision fp32 --rounds 1   # a check

What it measures (the spec: small, ctx 512, batch 8, bf16, train, sdpa, 3 warm-up and 20 measured steps, unless
flags say otherwise), every figure in wall seconds:
- `import torch` in a process of its own, each round: what a cold worker pays before anything of perfconsole's;
- the CLI, cold (`perfconsole run ... --json`, no console) and beside a console (its warm process up and ready, the
  run forked from it), in turn each round, on a data folder an untimed first run warmed (peaks, FLOP count): its
  wall time less its steps' own time, and launch to the first warm-up step's line less that step's own time;
- the console (Textual's pilot, sampling NVML on a GPU as for a user), cold and with its warm process ready: Enter on Run to the
  console's record holding the first warm-up step (that step's own time is in it, and printed beside it);
- a compiled run (`--compile`) on an empty data folder, then the same spec again: launch to the first measured
  step of each, the record's compile cache (hit or miss) and start phases; both cold CLI runs;
- with `--ladder` (or alone with `--ladder-only`): `perfconsole ladder` (2.7B, the rungs eager, compile,
  cuda-graphs, bf16-weights and fp8, 3 warm-up and 10 measured steps) twice on one empty data folder, each one's
  wall time and its rungs' compile cache.

The targets it prints against: console Enter to the first warm-up step <= 2.0 s; the CLI beside a console <= 1.5 s
beyond its steps; the cold CLI <= `import torch` + 2 s beyond its steps; the compiled rerun's launch to first
measured step <= 25 % of the first run's; the ladder's second run <= 120 s. A miss is printed as a miss.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_first_run import beside_console, one_run, torch_import_s  # noqa: E402
from bench_warm_start import console_runs  # noqa: E402

LADDER_RUNGS = "eager,compile,cuda-graphs,bf16-weights,fp8"


def run_flags(args: argparse.Namespace, steps: int | None = None) -> list[str]:
    return ["run", "--size", args.size, "--ctx", str(args.ctx), "--batch", str(args.batch), "--precision",
            args.precision, "--mode", "train", "--attention", "sdpa", "--device", args.device, "--warmup", "3",
            "--steps", str(steps or args.steps), "--json"]


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def cli_part(args, work: Path) -> dict:
    """Cold and beside a console, in turn, on one warmed data folder; `import torch` alone each round."""
    data = work / "cli"
    one_run({}, data, run_flags(args))  # untimed: the device's peaks, the FLOP count
    runs, imports = [], []
    for r in range(args.rounds):
        imports.append(torch_import_s())
        order = (("cold", "beside") if r % 2 == 0 else ("beside", "cold"))
        for how in order:
            timed = one_run({}, data, run_flags(args)) if how == "cold" else beside_console({}, data, run_flags(args))
            runs.append({"how": how, "round": r, **timed})
            print(f"cli {how} {r + 1}: beyond its steps {timed['overhead_s']:.2f} s, to its first step "
                  f"{timed['before_first_step_s']:.2f} s, started {timed['start']}", file=sys.stderr, flush=True)
    return {"torch_import_s": imports, "runs": runs}


def console_part(args, work: Path) -> dict:
    from perfconsole.core.settings import RunSpec

    os.environ["PERFCONSOLE_DATA_DIR"] = str(work / "cli")  # warmed by the CLI part's first run
    spec = RunSpec(size=args.size, ctx=args.ctx, batch=args.batch, precision=args.precision, mode="train",
                   attention="sdpa", device=args.device, warmup=3, steps=args.steps)
    nvml = args.device == "cuda"  # the console samples NVML as it does for a user
    cold = asyncio.run(console_runs(False, args.rounds, spec, nvml))
    warm = asyncio.run(console_runs(True, args.rounds, spec, nvml))
    for name, (times, ready, hows) in (("cold", cold), ("warm", warm)):
        print(f"console {name}: {[round(t, 2) for t in times]} s ({', '.join(hows)})"
              + (f"; its warm process ready {ready:.2f} s after the mount" if ready is not None else ""),
              file=sys.stderr, flush=True)
    return {"cold": {"enter_to_first_warmup_step_s": cold[0], "starts": cold[2]},
            "warm": {"enter_to_first_warmup_step_s": warm[0], "starts": warm[2], "ready_after_mount_s": warm[1]}}


def compile_part(args, work: Path) -> dict:
    data = work / "compiled"
    runs = []
    for i in range(2):
        timed = one_run({}, data, [*run_flags(args), "--compile"])
        runs.append(timed)
        print(f"compiled run {i + 1}: launch to first measured step {timed['first_measured_step_s']:.2f} s, cache "
              f"{timed['compile_cache']}, phases {timed['phases']}", file=sys.stderr, flush=True)
    return {"runs": runs}


def ladder_part(args, work: Path) -> dict:
    """`--ladder-runs` runs of the ladder on one data folder under `work`; with `--work` kept between calls on a
    warm machine, a later call's run follows the earlier ones (their figures in work/ladder_runs.json)."""
    data = work / "ladder"
    held = work / "ladder_runs.json"
    runs = json.loads(held.read_text()) if held.exists() else []
    for i in range(len(runs), len(runs) + args.ladder_runs):
        save = work / f"ladder_{i + 1}.json"
        argv = [sys.executable, "-m", "perfconsole.tui.main", "ladder", "--size", args.ladder_size, "--device",
                args.device, "--rungs", args.ladder_rungs, "--warmup", "3", "--steps", "10", "--save", str(save)]
        t0 = time.perf_counter()
        done = subprocess.run(argv, env={**os.environ, "PERFCONSOLE_DATA_DIR": str(data)}, capture_output=True,
                              text=True, timeout=args.ladder_timeout)
        wall = time.perf_counter() - t0
        cells = []
        if save.exists():  # the ladder's snapshot: its runs (a record a rung) and each cell's seconds
            doc = json.loads(save.read_text())["data"]
            for record, seconds in zip(doc.get("runs") or [], doc.get("cell_seconds") or []):
                cells.append({"name": record.get("name"), "status": record.get("status"), "cell_s": seconds,
                              "compile_cache": record.get("compile_cache"), "start": record.get("start"),
                              "profile_s": (record.get("profile") or {}).get("seconds")})
        runs.append({"wall_s": wall, "code": done.returncode, "cells": cells, "stderr_tail": done.stderr[-600:],
                     "command": " ".join(argv[1:])})
        held.write_text(json.dumps(runs, indent=1) + "\n")
        print(f"ladder {i + 1}: {wall:.1f} s, exit {done.returncode}; cells "
              + ", ".join(f"{c['cell_s']:.1f} s (cache {c['compile_cache']}; profile pass {c['profile_s']})"
                          for c in cells), file=sys.stderr, flush=True)
    return {"runs": runs}


def verdict(value: float, target: float) -> str:
    return "within" if value <= target else "over"


def report(result: dict) -> list[str]:
    """The Markdown table of the targets, each beside its cold figure."""
    rows = ["| target | measured | cold beside it | verdict |", "| --- | --- | --- | --- |"]
    cli = result.get("cli")
    if cli:
        imp = med(cli["torch_import_s"])
        cold = [r for r in cli["runs"] if r["how"] == "cold"]
        beside = [r for r in cli["runs"] if r["how"] == "beside"]
        b, c = med([r["overhead_s"] for r in beside]), med([r["overhead_s"] for r in cold])
        rows.append(f"| CLI beside a console: beyond its steps <= 1.5 s | {b:.2f} s | cold {c:.2f} s | {verdict(b, 1.5)} |")
        rows.append(f"| cold CLI: beyond its steps <= `import torch` + 2 s ({imp:.2f} + 2 s) | {c:.2f} s | - | "
                    f"{verdict(c, imp + 2.0)} |")
        fb = med([r["before_first_step_s"] for r in beside])
        fc = med([r["before_first_step_s"] for r in cold])
        rows.append(f"| CLI: launch to the first warm-up step (less its own time) | {fb:.2f} s beside a console | "
                    f"{fc:.2f} s | - |")
    con = result.get("console")
    if con:
        w, c = med(con["warm"]["enter_to_first_warmup_step_s"]), med(con["cold"]["enter_to_first_warmup_step_s"])
        rows.append(f"| console: Enter to the first warm-up step <= 2.0 s | {w:.2f} s | {c:.2f} s | {verdict(w, 2.0)} |")
    comp = result.get("compile")
    if comp:
        first, again = (r["first_measured_step_s"] for r in comp["runs"])
        rows.append(f"| compiled rerun: launch to first measured step <= 25 % of the first run's | {again:.2f} s "
                    f"({again / first:.0%}; cache {comp['runs'][1]['compile_cache']}) | first run {first:.2f} s "
                    f"(cache {comp['runs'][0]['compile_cache']}) | {verdict(again / first, 0.25)} |")
    lad = result.get("ladder")
    if lad and len(lad["runs"]) >= 2:
        one, two = (r["wall_s"] for r in lad["runs"][:2])
        rows.append(f"| the ladder a second time <= 120 s | {two:.1f} s | first time {one:.1f} s | {verdict(two, 120)} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", default="small")
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--precision", default="bf16")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3, help="rounds of the CLI's and the console's runs (3)")
    p.add_argument("--ladder", action="store_true", help="also the ladder, twice (minutes on a GPU)")
    p.add_argument("--ladder-only", action="store_true", help="the ladder alone")
    p.add_argument("--ladder-size", default="2.7B")
    p.add_argument("--ladder-rungs", default=LADDER_RUNGS)
    p.add_argument("--ladder-timeout", type=float, default=900.0, help="seconds a ladder run may take (900)")
    p.add_argument("--ladder-runs", type=int, default=2, help="ladder runs in this call (2; 1 a call where one "
                                                               "takes most of a call's time, with --work kept)")
    p.add_argument("--work", default=None, metavar="DIR", help="the data folders and files (default: a new "
                                                                 "temporary folder); reuse it to go on")
    p.add_argument("--json", default=None, metavar="FILE", help="every figure, as JSON")
    args = p.parse_args(argv)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-gpu-loop-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)   # bytecode written and read, as after `pip install`
    os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    result: dict = {"args": vars(args)}

    def keep() -> None:  # after every part: a call cut short keeps what it measured
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n")

    parts = [("ladder", ladder_part)] if args.ladder_only else [
        ("cli", cli_part), ("console", console_part), ("compile", compile_part),
        *([("ladder", ladder_part)] if args.ladder else [])]
    for name, part in parts:
        result[name] = part(args, work)
        keep()
    print("\n".join(report(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

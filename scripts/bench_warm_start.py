"""How long a run takes to begin, forked from a warm process against a cold `python -m` worker (tiny, CPU).

    .venv/bin/python scripts/bench_warm_start.py --repeat 5 --out docs/results/warm_start.md

Two views, in one run, cold and warm taking turns so that the machine's load falls on both alike:
- core: from `Launch.events()` being asked for its first event to the `run_started` event (the worker is up)
  and to the first `step` event (the first warm-up step done);
- console: in the real app (Textual's pilot), from Enter on the launch form's Run to the moment the console's
  record of the run holds its first step; a cold console (no warm process) against one whose warm process has
  finished importing.
A first run (not counted) measures the device's peaks and caches the FLOP count in the data folder, so every
counted run finds both, as every run but a machine's first does. Times are medians in wall seconds.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.5   # issue 40: warm, from Enter on the launch form to the first step event


def spec():
    from perfconsole.core.settings import RunSpec

    return RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=2, mode="train")


def core_run(warm_on: bool) -> tuple[float, float, float, float, str]:
    """Seconds to run_started, to the model built and its FLOPs counted (`model`), to the first step; the first
    step's own time; how the run started."""
    from perfconsole.core.launch import warm
    from perfconsole.core.launch.launcher import Launch

    os.environ[warm.OFF_VAR] = "on" if warm_on else "off"
    launch = Launch(spec())
    t0 = time.perf_counter()
    started = model = first = own = None
    for event in launch.events():
        if event.type == "run_started" and started is None:
            started = time.perf_counter() - t0
        if event.type == "model" and model is None:
            model = time.perf_counter() - t0
        if event.type == "step" and first is None:
            first, own = time.perf_counter() - t0, event.total_ms / 1e3
    assert None not in (started, model, first), launch.stderr_tail
    return started, model, first, own, launch.start_how


async def console_runs(warm_on: bool, repeat: int, run_spec=None, nvml: bool = False,
                       ) -> tuple[list[float], float | None, list[str]]:
    """Enter on Run to the first step, `repeat` times in one console (the spec `run_spec`, tiny on the CPU unless
    given; with `nvml` the console samples the GPUs as it does for a user); and how long after its mount the warm
    process was ready (None: cold)."""
    from perfconsole.core.launch import warm
    from perfconsole.tui.app import PerfConsole

    os.environ[warm.OFF_VAR] = "on"
    app = PerfConsole(run_spec or spec(), **({} if nvml else {"sampler": lambda _i: None}))
    app.warm_start = warm_on
    times, hows, ready = [], [], None
    # When the console's record of the run first holds a step: the pilot's press returns only once the screen
    # has settled (about 0.6 s here, the live tab drawn), which may be after the step came in.
    held: dict[str, float] = {}
    fold = app._fold

    def timed_fold(run_id: str):
        folded = fold(run_id)
        record = app.session.run(run_id)
        if record is not None and record.warmup_steps:
            held.setdefault(run_id, time.perf_counter())
        return folded

    app._fold = timed_fold
    async with app.run_test(size=(100, 34)) as pilot:
        await pilot.pause()
        if warm_on:
            t0 = time.perf_counter()
            while not warm._own.ready.is_set():  # a user fills the form meanwhile
                await pilot.pause(0.05)
            ready = time.perf_counter() - t0
        for i in range(repeat):
            app.query_one("#tabs").active = "launch"  # back to the form (a run shows the live tab)
            await pilot.pause()
            app.main("#btn-run").focus()
            await pilot.pause()
            t0 = time.perf_counter()
            await pilot.press("enter")
            while not (len(app.session.runs) > i and app.session.runs[-1].id in held):
                await pilot.pause(0.01)
            times.append(held[app.session.runs[-1].id] - t0)
            while not app.session.runs[-1].finished:
                await pilot.pause(0.05)
            hows.append(app.session.runs[-1].environment.get("start") or "?")
    return times, ready, hows


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s" if xs else "-"


def machine() -> str:
    load = os.getloadavg()[0]
    return (f"`nproc` {os.cpu_count()}, {platform.machine()}, Python {platform.python_version()}; "
            f"1-minute load average {load:.2f} as it ended")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="counted runs of each kind (5)")
    parser.add_argument("--out", default=None, help="write the results page here (Markdown)")
    parser.add_argument("--no-console", action="store_true", help="the core view only")
    args = parser.parse_args(argv)
    os.environ["PERFCONSOLE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-warm-")
    from perfconsole.core.launch import warm

    load_start = os.getloadavg()[0]
    core_run(False)  # peaks and the FLOP count, once, as a machine's first run does
    os.environ[warm.OFF_VAR] = "on"
    own = warm.start_own()
    t0 = time.perf_counter()
    assert own.wait_ready() is None, list(own.stderr_tail)
    warm_import = time.perf_counter() - t0
    cold, hot = [], []
    for i in range(args.repeat):
        for warm_on, into in ((False, cold), (True, hot)) if i % 2 == 0 else ((True, hot), (False, cold)):
            into.append(core_run(warm_on))
            print(f"core {'warm' if warm_on else 'cold'}: run_started {into[-1][0]:.2f} s, model {into[-1][1]:.2f} s, "
                  f"first step {into[-1][2]:.2f} s, of it the step {into[-1][3]:.2f} s ({into[-1][4]})", flush=True)
    warm.stop_own()
    assert all(r[-1] == "warm" for r in hot) and all(r[-1].startswith("cold") for r in cold)
    con_cold = con_hot = None
    if not args.no_console:
        con_cold = asyncio.run(console_runs(False, args.repeat))
        print(f"console cold: {[round(t, 2) for t in con_cold[0]]} ({con_cold[2][0]})", flush=True)
        con_hot = asyncio.run(console_runs(True, args.repeat))
        print(f"console warm: {[round(t, 2) for t in con_hot[0]]} ({con_hot[2][0]}); "
              f"ready {con_hot[1]:.2f} s after mount", flush=True)
        assert all(h == "warm" for h in con_hot[2]) and all(h.startswith("cold") for h in con_cold[2])
    rows = [("core: Launch to `run_started` (the worker is up)", [c[0] for c in cold], [h[0] for h in hot]),
            ("core: Launch to `model` (built, FLOPs counted)", [c[1] for c in cold], [h[1] for h in hot]),
            ("core: Launch to the first step", [c[2] for c in cold], [h[2] for h in hot]),
            ("core: the first step's own time (`total_ms`)", [c[3] for c in cold], [h[3] for h in hot])]
    if con_cold and con_hot:
        rows.append(("console: Enter on Run to the first step", con_cold[0], con_hot[0]))
    table = ["| from | to | cold (median) | warm (median) | cold / warm | every cold run | every warm run |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, c, h in rows:
        frm, to = name.split(" to ", 1) if " to " in name else (name, "")
        table.append(f"| {frm} | {to} | {med(c)} | {med(h)} | {statistics.median(c) / statistics.median(h):.1f}x | "
                     f"{', '.join(f'{x:.2f}' for x in c)} | {', '.join(f'{x:.2f}' for x in h)} |")
    print("\n".join(table))
    target = [f"{name.split(' to ', 1)[0]} to the first step, warm: median {statistics.median(h):.2f} s, "
              f"{'within' if statistics.median(h) < TARGET_S else 'over'} the {TARGET_S} s target"
              for name, _c, h in rows if name.endswith("the first step")]
    print("\n".join(target))
    if args.out:
        write_page(Path(args.out), table, target, args, warm_import, con_hot[1] if con_hot else None, load_start)
    return 0


def write_page(out: Path, table: list[str], target: list[str], args, warm_import: float, ready: float | None,
               load: float) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    code = subprocess.run(["git", "log", "-1", "--format=%h", "--", "core", "tui", "model"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "core", "tui", "model"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    cmd = "scripts/bench_warm_start.py " + " ".join(sys.argv[1:] if sys.argv[1:] else [f"--repeat {args.repeat}"])
    lines = [
        "# Warm start: a run forked from a warm process against a cold worker (tiny, CPU)", "",
        f"Commit: `{commit}` ({time.strftime('%Y-%m-%d')}); the code measured (core/, tui/, model/) last changed in"
        f" `{code}`{', with uncommitted changes to it' if dirty else ''}.",
        "",
        "Device: the 2-core CPU machine CI runs on (no GPU); the two cores are shared with other engineers' work.",
        "",
        "Command (from the repo root):", "", f"    .venv/bin/python {cmd}", "",
        f"Machine: {machine()}; {load:.2f} as it began.", "",
        table[0], *table[1:], "",
        "Against the target (issue 40: warm, Enter on Run to the first step under 0.5 s for tiny on the CPU):", "",
        *[f"- {line}" for line in target], "",
        "Where the time goes: up to `run_started` is the start itself, which the warm process takes away (a cold"
        " worker imports torch and the worker's modules first). From `run_started` to `model` a cold worker also"
        " imports what the warm process has loaded: torch.utils.flop_counter to count FLOPs, and torch._dynamo,"
        " which constructing torch's AdamW imports. The rest is the run's own work, warm or cold: building tiny's"
        " weights (a truncated normal drawn for every matrix) and the first warm-up step (its own time is in the"
        " table). On a shared 2-core machine every part stretches with the load (the load averages above), so"
        " the medians move from one run of the script to the next; the start itself, up to `run_started`, is"
        " the part the warm process removes.", "",
        f"The warm process took {warm_import:.2f} s from its start to ready (imports torch, its compiler stack and"
        " the workers) in the core view"
        + (f", and was ready {ready:.2f} s after the console's mount in the console view" if ready is not None else "")
        + "; a console starts it as it opens, so a user filling the form does not wait for it.", "",
        "Each counted run is tiny (d_model 64, 2 layers), ctx 32, batch 2, train, 1 warm-up step and 2 measured, on"
        " the CPU. \"Cold\" is a fresh `python -m perfconsole.core.measure.worker` (PERFCONSOLE_WARM=off in the core"
        " view; no warm process in the console view); \"warm\" is the same worker forked from the warm process. The"
        " first step includes the first warm-up step's own time, which no start can save.", "",
    ]
    out.write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())

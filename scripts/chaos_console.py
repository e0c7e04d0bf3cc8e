"""Chaos for the console: start the real `perfconsole` in tmux (80x24), end it at a random moment of its
life (kill its tmux session, as a dropped SSH session does, or send it SIGHUP, SIGTERM or SIGINT), and
check that within a few seconds no process of it is left (console, its warm process or a worker, found by
an environment marker unique to the trial and by the console's process tree, since others run perfconsole
here too) and that what it measured was saved.

Past the first frame, every other trial's console is given a warm process it does not own (SHARED_VAR), as a
tab of `perfconsole serve` is given its server's: its runs are forked from that one, and must go with the
console while the shared warm process serves on. The rest start and own theirs, as a console in a terminal does.

    python scripts/chaos_console.py --trials 500 --seed 7          # the long run (docs/results/chaos_long.md)
    python scripts/chaos_console.py --seed 7 --only 123            # replay one trial
    python scripts/chaos_console.py --repro 100 --parallel 3       # the issue's reproduction, 100 times
    python scripts/chaos_console.py --nsys 4 --seed 7              # mid-nsys-run trials (GPU machine)

Every trial is drawn from (seed, index) alone, so a failure names both and replays on its own.
tests/tui/test_chaos.py runs a bounded number of trials in the normal suite, and on the GPU machine the
mid-nsys-run trials: a console running a CUDA spec under nsys, ended while the capture process runs (nsys's
agent, `nsys --start-agent`, runs in a session of its own: a console killed so once left it behind).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from perfconsole.core.launch import warm

BIN = Path(os.environ.get("PERFCONSOLE_CHAOS_BIN") or Path(sys.executable).with_name("perfconsole"))  # the console under test
MARKER = "PERFCONSOLE_CHAOS_TRIAL"
FLAGS = ["--size", "tiny", "--ctx", "32", "--batch", "2", "--device", "cpu", "--mode", "train"]
LEFT_S = 8.0          # the exit guard acts after 3 s; a console still there after this has outlived its terminal
STUCK_S = 30.0        # how long a late one is watched further, to tell a slow exit (a loaded CPU) from a stuck one
ENDINGS = ("kill-session", "SIGHUP", "SIGTERM", "SIGINT")
# moment: (console flags, slow-step fault in ms or None). Cheap moments come first: they come more often (WEIGHTS).
MOMENTS: dict[str, tuple[list[str], int | None]] = {
    "startup": ([], None),            # before the first frame, or just at it
    "first-frame": ([], None),        # right after "Launch" shows: where the textual hang was
    "idle": ([], None),
    "dialog": ([], None),             # the help screen or the command palette open
    "quitting": ([], None),           # q pressed (no run: the console is on its way out)
    "launching": (["--start", "--steps", "3", "--warmup", "1"], None),      # the worker starting up
    "mid-run": (["--start", "--steps", "400", "--warmup", "1"], 40),
    "queued": (["--start", "--steps", "400", "--warmup", "1"], 40),         # a second run waiting
    "sweep": (["--steps", "2", "--warmup", "1"], None),                     # ctrl+t: fp32, bf16, fp16 queued
    "profiling": (["--start", "--steps", "3", "--warmup", "1", "--profile", "torch"], None),
    "export": (["--start", "--steps", "2", "--warmup", "1", "--profile", "torch"], None),  # exporting a profiled run
}
WEIGHTS = {"startup": 3, "first-frame": 3, "idle": 2, "dialog": 2, "quitting": 2, "launching": 2, "mid-run": 2,
           "queued": 1, "sweep": 1, "profiling": 1, "export": 1}
# One pass of trials: every moment as many times as its weight, in turn (20 trials). Drawn at random by weight,
# 40 trials missed a given moment of weight 1 in one run of eight ((19/20) ** 40 = 0.13), one of the four such
# moments in about four runs of ten; a pass meets each one.
CYCLE = [moment for moment, weight in WEIGHTS.items() for _ in range(weight)]
# Never drawn by Trial.draw (it needs a GPU and nsys): nsys_trials() makes these. The plain process of the
# profiled run measures NSYS_STEPS steps first; the cue is the capture process under nsys.
NSYS_STEPS = 60
MOMENTS["nsys-mid-run"] = (["--device", "cuda", "--size", "small", "--ctx", "256", "--batch", "4", "--precision", "bf16",
                            "--profile", "nsys", "--start", "--steps", str(NSYS_STEPS), "--warmup", "2"], None)
AGENT = "--start-agent"   # in the command line of nsys's agent
WARM = "perfconsole.core.launch.warm_server"   # in the command line of the console's warm process
OWN_WARM = ("startup", "first-frame")  # moments whose trials always own their warm process: it is starting then


@dataclass(frozen=True)
class Trial:
    seed: int
    index: int
    moment: str
    ending: str
    delay: float          # seconds from the moment's cue to the ending
    keeper: bool          # a second tmux session keeps the tmux server (the console's parent) alive
    shared: bool = False  # the console is given a warm process it does not own (as a serve tab is)

    @classmethod
    def draw(cls, seed: int, index: int) -> Trial:
        """Trial `index` of `seed`: its moment from CYCLE in turn, its ending in turn too, shifted by the seed and
        the pass (a moment's trials of one pass end in different ways); its delay and whether the tmux server is
        kept drawn from the seed. Past the first frame, every other trial of a pass shares a warm process, and the
        next pass turns each one's over (a moment of weight 2 has one of each in every pass)."""
        rng = random.Random(f"{seed}:{index}")
        run, at = divmod(index, len(CYCLE))
        moment = CYCLE[at]
        ending = ENDINGS[(seed + at + run) % len(ENDINGS)]
        spread = {"startup": 0.8, "first-frame": 0.15, "idle": 2.0, "launching": 3.0, "sweep": 6.0}.get(moment, 0.8)
        shared = moment not in OWN_WARM and (at + run) % 2 == 1
        return cls(seed, index, moment, ending, round(rng.uniform(0, spread), 3), rng.random() < 0.5, shared)

    def __str__(self) -> str:
        return (f"seed {self.seed} trial {self.index}: {self.ending} at {self.moment} + {self.delay:.3f} s"
                f"{' (tmux server kept)' if self.keeper else ''}{' (shared warm process)' if self.shared else ''}")

    def replay(self) -> str:
        if self.moment == "nsys-mid-run":
            return f"python scripts/chaos_console.py --seed {self.seed} --nsys {self.index + 1}  # the last of them"
        return f"PERFCONSOLE_CHAOS_SEED={self.seed} python scripts/chaos_console.py --only {self.index}"


def nsys_trials(seed: int, n: int) -> list[Trial]:
    """n mid-nsys-run trials: the endings in turn, each at a drawn delay after the capture process shows."""
    rng = random.Random(f"{seed}:nsys")
    endings = ("kill-session", "SIGTERM", "SIGHUP", "SIGINT")  # the (the pty gone) first
    return [Trial(seed, i, "nsys-mid-run", endings[i % len(endings)], round(rng.uniform(0, 6), 3), rng.random() < 0.5)
            for i in range(n)]


@dataclass
class Outcome:
    trial: Trial
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cue_seen: bool = True
    exit_s: float = 0.0   # from the ending until nothing of the console was left
    agents_at_end: int = 0  # nsys agents alive as the trial ended the console (mid-nsys-run trials)
    warm_at_end: int = 0    # the console's warm processes (core.launch.warm_server) alive as the trial ended it
    forked_at_end: int = 0  # a shared trial's runs forked from the shared warm process, alive as it ended the console
    screen_at_miss: str = ""  # the console's screen when its cue did not show: what it showed instead


class Tmux:
    def __init__(self, root: Path) -> None:
        self.socket = str(root / "tmux.sock")
        self.session = "chaos"

    def __call__(self, *args: str) -> str:
        try:
            return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True,
                                  timeout=20).stdout
        except subprocess.TimeoutExpired:
            return ""

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", self.session)

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float, every: float = 0.1) -> re.Match[str] | None:
        """The first match of `pattern` on the screen, read every `every` s: each read is a tmux client, about
        3 ms of CPU, so only a moment that must be caught at once (the first frame) reads at 20 ms."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            m = re.search(pattern, self.screen())
            if m:
                return m
            time.sleep(every)
        return None

    def keys(self, *keys: str) -> None:
        for k in keys:
            self("send-keys", "-t", self.session, k)
            time.sleep(0.15)

    def pane(self, fmt: str) -> str:
        return self("display-message", "-p", "-t", self.session, fmt).strip()

    def console(self, width: int, height: int, data_dir: Path) -> None:
        """The console (BIN) in a new session of width x height, on its own data folder, not forked from a warm
        process. COLUMNS and LINES, where the caller's environment has them, would reach the console through tmux
        and fix its size at theirs: 0 lets it follow the terminal."""
        env = {"PERFCONSOLE_DATA_DIR": str(data_dir), "PERFCONSOLE_WARM": "off", "TERM": "xterm-256color",
               "LANG": "C.UTF-8", "COLUMNS": "0", "LINES": "0"}
        env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        self("new-session", "-d", "-s", self.session, "-x", str(width), "-y", str(height), *env_args, str(BIN))


def marked(tag: str) -> list[psutil.Process]:
    """Live processes whose environment carries this trial's marker (the console and its workers)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(MARKER) == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def _cmdline_has(p: psutil.Process, word: str) -> bool:
    try:
        return word in p.cmdline()
    except psutil.Error:
        return False


def warm_processes(procs: list[psutil.Process]) -> set[int]:
    """The pids of warm processes among `procs` (each may be listed twice: found in the tree and by mark). A child
    it has just forked shows its command line too until it writes the worker's: one whose parent is one is not."""
    servers = {p.pid: p for p in alive(procs) if _cmdline_has(p, WARM)}
    found = set()
    for pid, p in servers.items():
        try:
            if p.ppid() not in servers:
                found.add(pid)
        except psutil.Error:
            continue
    return found


def forked_in(server: int, work: Path) -> list[psutil.Process]:
    """The live processes under warm process `server` that work in `work`: a shared trial's runs (a forked worker
    takes its run's directory, the console's; /proc shows it the warm process's environment, not the trial's mark)."""
    try:
        below = psutil.Process(server).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for p in below:
        try:
            if p.status() != psutil.STATUS_ZOMBIE and os.path.realpath(p.cwd()) == os.path.realpath(work):
                found.append(p)
        except psutil.Error:
            continue
    return found


def shared_warm() -> str:
    """SHARED_VAR's value for this process's warm process (started if none is up), which the shared trials'
    consoles are given."""
    own = warm.start_own()
    why = "the warm path is off (PERFCONSOLE_WARM)" if own is None else own.wait_ready()
    if why:
        raise RuntimeError(f"the shared trials need a warm process: {why}")
    return warm.shared_value(own)


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            pass
    return out


def agents() -> set[int]:
    """Live nsys agents (`nsys --start-agent ...`), whoever started them."""
    found = set()
    for p in psutil.process_iter():
        try:
            if AGENT in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE:
                found.add(p.pid)
        except psutil.Error:
            continue
    return found


def stacks(procs: list[psutil.Process]) -> str:
    """py-spy's dump of each process, where py-spy is installed (pip install py-spy): why it is still there."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return ""
    out = []
    for p in procs:
        try:
            out.append(subprocess.run([spy, "dump", "--pid", str(p.pid)], capture_output=True, text=True,
                                      timeout=30).stdout)
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "\n".join(out)


def describe(p: psutil.Process) -> str:
    try:
        return f"{p.pid} ({p.status()}, {time.time() - p.create_time():.1f} s old) {' '.join(p.cmdline())[:100]}"
    except psutil.Error:
        return f"{p.pid} (gone as it was listed)"


# The worker measures the device's peaks on its first run and caches them in the data directory; on a
# shared 2-core CPU the full measurement takes minutes (bf16 matmuls). Each trial's data directory gets
# a copy of one peaks.json measured here, once, with small sizes (real figures, a lower bound of the
# peak; chaos needs the cache hit, not the figures), under the key the worker looks up.
SEED_PEAKS = """
import sys, torch
from perfconsole.core.flops import save_peaks
from perfconsole.core.measure import device_peaks
device_peaks.CPU_SIZES, device_peaks.REPEATS = (256, 8 << 20), 2
save_peaks(device_peaks.measure(torch.device("cpu")))
"""


def seed_peaks(data: Path) -> Path:
    """The session's peaks.json (measured once, quickly: see SEED_PEAKS), for every trial's data directory."""
    data.mkdir(parents=True, exist_ok=True)
    found = data / "peaks.json"
    if not found.exists():
        subprocess.run([sys.executable, "-c", SEED_PEAKS], env={**os.environ, "PERFCONSOLE_DATA_DIR": str(data)},
                       capture_output=True, timeout=900, check=True)
    return found


def _steps_saved(data: Path) -> int:
    """The most measured steps any snapshot in the data directory holds (a run's, or a ladder rung's)."""
    def walk(o: object) -> int:
        if isinstance(o, dict):
            n = len(o["steps"]) if isinstance(o.get("steps"), list) else 0
            return max([n, *(walk(v) for k, v in o.items() if k != "steps")])
        if isinstance(o, list):
            return max([0, *(walk(v) for v in o)])
        return 0

    best = 0
    for f in (data / "snapshots").glob("*.json"):
        try:
            best = max(best, walk(json.loads(f.read_text())))
        except (OSError, ValueError):
            pass
    return best


def _act(tmux: Tmux, trial: Trial) -> tuple[bool, int]:
    """Bring the console to the trial's moment. Returns (cue seen, measured steps on screen at the cue)."""
    m = trial.moment
    if m == "startup":
        return True, 0
    if not tmux.wait_for("Launch", 30, every=0.02 if m == "first-frame" else 0.1):
        return False, 0
    if m == "dialog":
        tmux.keys("?" if trial.index % 2 else "C-p")
    elif m == "quitting":
        tmux.keys("q")
    elif m == "sweep":
        tmux.keys("C-t")
    elif m in ("mid-run", "queued"):
        seen = tmux.wait_for(r"step ([1-9]\d*)/\d+", 120)
        if seen is None:
            return False, 0
        if m == "queued":
            tmux.keys("1", "C-e")
        return True, int(seen.group(1))
    elif m == "profiling":
        return tmux.wait_for("profiling", 90) is not None, 0
    elif m == "nsys-mid-run":  # the plain process has measured its steps; the capture process is under way
        return tmux.wait_for("under nsys", 300) is not None, NSYS_STEPS
    elif m == "export":
        if not tmux.wait_for("finished ·", 120):
            return False, 0
        tmux.keys("5", "e", "Enter")
        return True, 2
    return True, 0


def run_trial(trial: Trial, peaks: Path, root: Path, shared: str | None = None) -> Outcome:
    """One trial; `shared` is SHARED_VAR's value for a shared trial's console (run_trials makes it)."""
    start = time.monotonic()
    out = Outcome(trial)
    work = Path(tempfile.mkdtemp(prefix=f"chaos{trial.index}-", dir=root))
    data = work / "data"
    data.mkdir()
    shutil.copy(peaks, data / "peaks.json")
    tag = uuid.uuid4().hex
    flags, slow = MOMENTS[trial.moment]
    env = {MARKER: tag, "PERFCONSOLE_DATA_DIR": str(data), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    if slow:
        env["PERFCONSOLE_FAULT"] = f"slow:{slow}"
    server = 0  # a shared trial's warm process: the console's runs are forked from it, and it must serve on
    if trial.shared:
        if not shared:
            raise ValueError(f"{trial} needs a shared warm process")
        env[warm.SHARED_VAR] = shared
        server = int(shared.partition(":")[0])
    tmux = Tmux(work)
    env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
    agents_before = agents() if trial.moment == "nsys-mid-run" else set()
    try:
        if trial.keeper:
            tmux("new-session", "-d", "-s", "keeper", "-x", "80", "-y", "24", "sleep", "600")
        tmux("new-session", "-d", "-s", tmux.session, "-x", "80", "-y", "24", "-c", str(work), *env_args, str(BIN),
             *FLAGS, *flags)
        tmux("set-option", "-t", tmux.session, "remain-on-exit", "on")
        pid = int(tmux.pane("#{pane_pid}") or 0)
        out.cue_seen, steps_seen = _act(tmux, trial)
        if not out.cue_seen:
            out.screen_at_miss = tmux.screen()
        time.sleep(trial.delay)
        try:
            tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)] if pid else []
        except psutil.Error:
            tree = []
        tree += marked(tag)
        out.warm_at_end = len(warm_processes(tree))
        if server:
            forked = forked_in(server, work)
            out.forked_at_end = len(forked)
            tree += forked
        if trial.moment == "nsys-mid-run":  # an agent that lost its environment is found by its command line
            new_agents = agents() - agents_before
            out.agents_at_end = len(new_agents)
            for a in new_agents:
                try:
                    tree.append(psutil.Process(a))
                except psutil.Error:
                    pass
        if trial.ending == "kill-session":
            tmux("kill-session", "-t", tmux.session)
        elif pid:
            try:
                os.kill(pid, getattr(signal, trial.ending))
            except ProcessLookupError:
                pass
        ended, late = time.monotonic(), None
        while (left := alive(tree) + marked(tag) + (forked_in(server, work) if server else [])) \
                and time.monotonic() < ended + STUCK_S:
            late = [describe(p) for p in left] if time.monotonic() > ended + LEFT_S else None
            time.sleep(0.1)
        out.exit_s = time.monotonic() - ended
        if left:
            out.problems.append(f"left running after {STUCK_S:.0f} s: " + "; ".join(describe(p) for p in left))
        elif out.exit_s > LEFT_S:
            out.problems.append(f"left running after {LEFT_S:.0f} s, gone after {out.exit_s:.1f} s: {'; '.join(late or [])}")
        if left:
            out.problems.append(stacks(left))
        if server and not psutil.pid_exists(server):
            out.problems.append("the shared warm process ended with the console")
        if left:
            for p in left:
                try:
                    p.kill()
                except psutil.Error:
                    pass
        elif trial.ending != "kill-session" and trial.moment not in ("startup", "quitting") and out.cue_seen:
            status = tmux.pane("#{pane_dead_status}")
            want = str(128 + getattr(signal, trial.ending))
            if status and status != want:
                out.problems.append(f"exit status {status}, not {want}")
        if steps_seen and not left and _steps_saved(data) < steps_seen:
            out.problems.append(f"{steps_seen} measured steps were on screen, {_steps_saved(data)} saved")
    finally:
        tmux("kill-server")
        shutil.rmtree(work, ignore_errors=True)
    out.seconds = time.monotonic() - start
    return out


def run(seed: int, indices: list[int], parallel: int, peaks: Path, report=print) -> list[Outcome]:
    return run_trials([Trial.draw(seed, i) for i in indices], parallel, peaks, report)


def run_trials(trials: list[Trial], parallel: int, peaks: Path, report=print) -> list[Outcome]:
    """The trials, `parallel` at a time; the shared ones' consoles are given this process's warm process (call
    from the main thread, where it is started if none is up)."""
    shared = shared_warm() if any(t.shared for t in trials) else None
    root = Path(tempfile.mkdtemp(prefix="perfconsole-chaos-"))
    try:
        with ThreadPoolExecutor(parallel) as pool:
            outcomes = []
            for o in pool.map(lambda t: run_trial(t, peaks, root, shared), trials):
                outcomes.append(o)
                report(f"{'FAIL' if o.problems else 'ok  '} {o.trial} ({o.seconds:.1f} s, gone in {o.exit_s:.1f} s)"
                       f"{'' if o.cue_seen else ' [cue not seen]'}"
                       + (f" [{o.agents_at_end} nsys agent(s) alive at the ending]" if o.trial.moment == "nsys-mid-run" else "")
                       + f" [{o.warm_at_end} warm process(es) at the ending]"
                       + (f" [{o.forked_at_end} forked from the shared one]" if o.trial.shared else "")
                       + "".join(f"\n     {p}" for p in o.problems))
            return outcomes
    finally:
        shutil.rmtree(root, ignore_errors=True)


def repro(tries: int, parallel: int = 1, report=print) -> int:
    """The issue's reproduction: kill the tmux session the moment "Launch" shows; count what is left."""
    root = Path(tempfile.mkdtemp(prefix="perfconsole-repro-"))

    def one(i: int) -> int:
        tag = uuid.uuid4().hex
        work = root / str(i)
        work.mkdir()
        tmux = Tmux(work)
        tmux("new-session", "-d", "-s", tmux.session, "-x", "80", "-y", "24", "-e", f"{MARKER}={tag}",
             "-e", f"PERFCONSOLE_DATA_DIR={work / 'data'}", str(BIN))
        try:
            tmux.wait_for("Launch", 60, every=0.02)
            tmux("kill-session", "-t", tmux.session)
            ended = time.monotonic()
            while (left := marked(tag)) and time.monotonic() < ended + LEFT_S:
                time.sleep(0.1)
            late = list(left)
            dump = stacks(late) if late else ""
            while (left := marked(tag)) and time.monotonic() < ended + STUCK_S:
                time.sleep(0.2)
            report(f"try {i}: {len(late)} left after {LEFT_S:.0f} s, {len(left)} after {STUCK_S:.0f} s"
                   + "".join(f"\n     {describe(p)}" for p in late) + (f"\n{dump}" if dump else ""))
            for p in left:
                p.kill()
            return len(late)
        finally:
            tmux("kill-server")

    try:
        with ThreadPoolExecutor(parallel) as pool:
            return sum(pool.map(one, range(tries)))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=int(os.environ.get("PERFCONSOLE_CHAOS_TRIALS", str(len(CYCLE)))))
    p.add_argument("--seed", type=int, default=int(os.environ.get("PERFCONSOLE_CHAOS_SEED", "0") or 0))
    p.add_argument("--only", default=None, help="replay these trials of the seed (comma-separated indices)")
    p.add_argument("--parallel", type=int, default=3)
    p.add_argument("--repro", type=int, default=0, metavar="N", help="run the issue's reproduction N times instead")
    p.add_argument("--nsys", type=int, default=0, metavar="N",
                   help="run N mid-nsys-run trials instead, one at a time (needs a CUDA GPU and nsys)")
    args = p.parse_args(argv)
    if args.repro:
        left = repro(args.repro, args.parallel)
        print(f"reproduction: {args.repro} tries, {left} processes left")
        return 1 if left else 0
    peaks = seed_peaks(Path(tempfile.gettempdir()) / "perfconsole-chaos-peaks")
    indices = [int(i) for i in args.only.split(",")] if args.only else list(range(args.trials))
    t0 = time.monotonic()
    try:
        if args.nsys:  # one at a time: an agent is told apart from another trial's by when it appeared
            outcomes = run_trials(nsys_trials(args.seed, args.nsys), 1, peaks)
        else:
            outcomes = run(args.seed, indices, args.parallel, peaks)
    finally:
        warm.stop_own()  # the shared trials' warm process, where there were some
    failed = [o for o in outcomes if o.problems]
    leftovers = sum(1 for o in failed if any(x.startswith("left running") for x in o.problems))
    print(f"seed {args.seed}: {len(outcomes)} trials, {len(failed)} failed, {leftovers} with processes left, "
          f"{time.monotonic() - t0:.0f} s")
    for o in failed:
        print(f"  {o.trial}: {'; '.join(o.problems)}\n    replay: {o.trial.replay()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

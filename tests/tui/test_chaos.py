"""The console never outlives its terminal: the real `perfconsole` in tmux, ended at random moments of its
life by a killed tmux session, SIGHUP, SIGTERM or SIGINT (scripts/chaos_console.py draws and runs the
trials), must leave no console and no worker within a few seconds and keep what it measured.

Past its first frame the console has a warm process (core.launch.warm), whose command line names it: each
trial counts it at the ending, and it must be gone too. Every other trial past the first frame gives the console a
warm process it does not own instead, as `perfconsole serve` gives its tabs: the runs forked from it must go with
the console, and the shared warm process must serve on.

PERFCONSOLE_CHAOS_SEED fixes the seed (else one is drawn and named in any failure), and
PERFCONSOLE_CHAOS_TRIALS the number of trials (one pass of the moments, 20: scripts/chaos_console.py's CYCLE). A failure names its seed, trial and moment, and the
command that replays it. Skips where tmux is missing (CI installs it in .ci/run).
"""
from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from helpers import script_module

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


chaos = script_module("chaos_console")


@pytest.fixture(scope="session")
def peaks(cpu_peaks_file) -> Path:
    """The session's measured CPU peaks (tests/conftest.py), copied into every trial's data directory: no trial's run
    measures them (the script alone measures its own quickly, chaos.seed_peaks)."""
    return cpu_peaks_file


@pytest.mark.e2e
@pytest.mark.slow
@needs_tmux
def test_the_console_leaves_nothing_behind_whenever_its_terminal_dies(peaks):
    seed = int(os.environ.get("PERFCONSOLE_CHAOS_SEED") or random.randrange(1 << 30))
    trials = int(os.environ.get("PERFCONSOLE_CHAOS_TRIALS", str(len(chaos.CYCLE))))
    lines: list[str] = []
    outcomes = chaos.run(seed, list(range(trials)), parallel=2, peaks=peaks, report=lines.append)
    failed = [o for o in outcomes if o.problems]
    assert not failed, f"seed {seed}: {len(failed)} of {trials} trials failed\n" + "\n".join(
        f"{o.trial}: {'; '.join(o.problems)}\n  replay: {o.trial.replay()}" for o in failed)
    # The trials reached their moments (a cue never seen means the moment was not tested).
    missed = [o for o in outcomes if not o.cue_seen]
    assert len(missed) <= trials // 10, [str(o.trial) for o in missed]
    # Past its first frame and not on its way out, a console had its warm process, which went with it; one given
    # a shared warm process (as a serve tab is) started none, and its runs, forked from the shared one, went with
    # it while the shared one served on (run_trial checks both).
    up = [o for o in outcomes if o.cue_seen and o.trial.moment not in ("startup", "quitting")]
    assert all(o.warm_at_end == (0 if o.trial.shared else 1) for o in up), [f"{o.trial}: {o.warm_at_end}" for o in up]
    assert {o.trial.shared for o in up} == {False, True}
    running = [o for o in up if o.trial.shared and o.trial.moment in ("mid-run", "queued")]
    assert all(o.forked_at_end >= 1 for o in running), [f"{o.trial}: {o.forked_at_end}" for o in running]


@pytest.mark.slow
@pytest.mark.e2e
@needs_tmux
@pytest.mark.parametrize("moment", ["idle", "mid-run"])
def test_terminal_death_leaves_no_warm_process(peaks, moment):
    """The tmux session killed (a dropped SSH session) while the console idles with its warm process, and while
    a run forked from it runs: neither the warm process nor the run is left (the console's SIGHUP handling, the
    warm process's parent watch and PR_SET_PDEATHSIG between them)."""
    trials = [chaos.Trial(0, i, moment, "kill-session", delay, keeper) for i, (delay, keeper)
              in enumerate([(0.2, False), (0.5, True)])]
    outcomes = chaos.run_trials(trials, 1, peaks, report=lambda _line: None)
    assert all(o.cue_seen and o.warm_at_end == 1 for o in outcomes), [str(o.trial) for o in outcomes]
    assert not [o.problems for o in outcomes if o.problems]


@pytest.mark.e2e
@pytest.mark.slow
@needs_tmux
def test_killing_the_tmux_session_as_the_first_frame_shows_leaves_no_process():
    """The issue's reproduction, which left a console that ignored SIGTERM in 6 of 6 tries."""
    assert chaos.repro(5, report=lambda _line: None) == 0


GUARD_CHILD = textwrap.dedent("""
    import subprocess, sys, threading
    from perfconsole.core.launch.processes import ChildProcess
    from perfconsole.tui.exit_guard import ExitGuard
    worker = ChildProcess()
    worker.spawn(["sleep", "600"])                       # a worker in its own process group
    stray = subprocess.Popen(["sleep", "600"])           # a child nobody registered
    print(worker.pid, stray.pid, flush=True)
    guard = ExitGuard(grace_s=1.0)
    guard.arm()
    guard.trip(143)
    threading.Event().wait()                             # the main thread stuck for good, as textual's was
""")


def test_the_exit_guard_ends_a_stuck_console_and_its_children():
    proc = subprocess.Popen([sys.executable, "-c", GUARD_CHILD], stdout=subprocess.PIPE, text=True)
    children = [psutil.Process(int(pid)) for pid in proc.stdout.readline().split()]
    tripped = time.monotonic()  # about when the guard was tripped: the imports are behind it
    try:
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert code == 143
    assert time.monotonic() - tripped < 10  # a 1 s grace; the rest is slack for a loaded machine
    # The guard sent SIGKILL before it exited; on a loaded machine a killed child can still read as running for a
    # moment after its parent is gone (a clean-clone CI run saw one): it must be gone within 5 s.
    deadline = time.monotonic() + 5
    while chaos.alive(children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not chaos.alive(children), children


FAILING_STOP = textwrap.dedent("""
    import sys
    from perfconsole.tui.app import PerfConsole
    def boom():
        raise RuntimeError("a handler failed as the console stopped")
    def hang_up(self, signum=2):         # the stop meets an error in a handler: textual ends with its own code
        self.call_later(boom)
    PerfConsole.hang_up = hang_up
    from perfconsole.tui.main import main
    sys.exit(main(["--device", "cpu"]))
""")


@needs_tmux
def test_a_console_stopped_by_sigint_exits_130_even_when_stopping_fails(tmp_path, peaks):
    """A console whose stop met an error exited with textual's code (1 in chaos trial 225, an interrupt
    while a run launched; 0 here): the signal decides the status, and the traceback is still printed."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "peaks.json").write_bytes(peaks.read_bytes())
    tmux = chaos.Tmux(tmp_path)
    status = tmp_path / "status"
    script = tmp_path / "console.py"
    script.write_text(FAILING_STOP)
    line = f"PERFCONSOLE_DATA_DIR={data} {sys.executable} {script}; echo $? > {status}"
    try:
        tmux("new-session", "-d", "-s", tmux.session, "-x", "80", "-y", "24", "sh", "-c", line)
        assert tmux.wait_for("Launch", 60), tmux.screen()
        shell = psutil.Process(int(tmux.pane("#{pane_pid}")))
        console = next(p for p in shell.children() if p.name().startswith("python"))
        console.send_signal(2)
        deadline = time.monotonic() + 30
        while not status.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status.read_text().strip() == "130", tmux.screen()
    finally:
        tmux("kill-server")


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.shares_gpu  # times nothing; the only test of its part of the split that runs nsys (it counts agents)
@needs_tmux
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")
def test_a_console_ended_mid_nsys_run_leaves_no_nsys_agent(peaks):
    """A console ended while its run's capture process runs under nsys (its pty gone, or a signal) leaves no
    process at all: not the worker, not nsys, not nsys's agent (`nsys --start-agent`, in a session of its own,
    which outlived a console whose pty closed mid-run). Trials run one at a time, the endings in turn (a killed
    tmux session first); PERFCONSOLE_CHAOS_NSYS_TRIALS sets how many (2)."""
    from perfconsole.core.profiling.locate import find_nsys

    if find_nsys(None) is None:
        pytest.skip("nsys not found (PERFCONSOLE_NSYS, PATH, /opt/nvidia, /usr/local/cuda*)")
    # Without a console to start, tmux's pane is empty and no cue can show (the suite scripts put one on PATH)
    assert chaos.BIN.exists(), f"no console at {chaos.BIN}: install the project, or set PERFCONSOLE_CHAOS_BIN"
    seed = int(os.environ.get("PERFCONSOLE_CHAOS_SEED") or random.randrange(1 << 30))
    trials = chaos.nsys_trials(seed, int(os.environ.get("PERFCONSOLE_CHAOS_NSYS_TRIALS", "2")))
    lines: list[str] = []
    outcomes = chaos.run_trials(trials, 1, peaks, report=lines.append)
    print(f"seed {seed}\n" + "\n".join(lines))
    failed = [o for o in outcomes if o.problems]
    assert not failed, f"seed {seed}: {len(failed)} of {len(trials)} trials failed\n" + "\n".join(
        f"{o.trial}: {'; '.join(o.problems)}\n  replay: {o.trial.replay()}" for o in failed)
    assert all(o.cue_seen for o in outcomes), lines + [f"screen at the miss:\n{o.screen_at_miss}" for o in outcomes
                                                       if not o.cue_seen]
    # The case was met: an agent was alive when the console was ended, and went with it.
    assert any(o.agents_at_end for o in outcomes), lines


def test_a_pass_of_trials_meets_every_moment_and_ends_a_moment_in_different_ways():
    for seed in (0, 7, 11):
        trials = [chaos.Trial.draw(seed, i) for i in range(len(chaos.CYCLE))]
        assert {t.moment for t in trials} == set(chaos.WEIGHTS)
        for moment, weight in chaos.WEIGHTS.items():
            assert len({t.ending for t in trials if t.moment == moment}) == weight
    # the next pass ends each trial otherwise, and a trial replays as drawn
    assert [chaos.Trial.draw(3, i).ending for i in range(20)] != [chaos.Trial.draw(3, 20 + i).ending for i in range(20)]
    assert chaos.Trial.draw(3, 5) == chaos.Trial.draw(3, 5)


def test_past_the_first_frame_a_moment_s_trials_own_and_share_a_warm_process_in_turn():
    """A moment of weight 2 has one console with its own warm process and one given a shared one in every pass; a
    moment of weight 1 has one of each over two passes; the first frames' consoles always start their own."""
    n = len(chaos.CYCLE)
    for seed in (0, 7):
        two = [chaos.Trial.draw(seed, i) for i in range(2 * n)]
        assert not any(t.shared for t in two if t.moment in chaos.OWN_WARM)
        for moment, weight in chaos.WEIGHTS.items():
            if moment in chaos.OWN_WARM:
                continue
            for run in (two[:n], two[n:]) if weight > 1 else (two,):
                assert {t.shared for t in run if t.moment == moment} == {False, True}, (seed, moment)
    assert "shared warm process" in str(next(t for t in two if t.shared))


def test_mid_nsys_run_trials_are_made_apart_and_never_drawn():
    """They need a GPU and nsys: Trial.draw never gives one; nsys_trials gives the endings in turn, pty death first."""
    assert all(chaos.Trial.draw(7, i).moment != "nsys-mid-run" for i in range(500))
    trials = chaos.nsys_trials(7, 5)
    assert [t.ending for t in trials] == ["kill-session", "SIGTERM", "SIGHUP", "SIGINT", "kill-session"]
    assert all(t.moment == "nsys-mid-run" and 0 <= t.delay <= 6 for t in trials)
    assert "--profile" in chaos.MOMENTS["nsys-mid-run"][0] and "--nsys" in trials[0].replay()

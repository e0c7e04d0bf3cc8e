"""A ladder in the console: listed in Runs, opened into Grids as its table of rungs, with each rung's
speed-of-light bars and GPU busy share; and a run's statistics name its fraction of speed of light.

On a real CPU ladder of the tiny model (tests/fixtures/ladders/), whose GPU-only rungs say why they did not run."""
from __future__ import annotations

import dataclasses
import os
import shutil
import time

import psutil
import pytest
from textual.widgets import Static

from perfconsole.core import store
from perfconsole.core.settings import RunSpec
from perfconsole.tui.screens.dialogs import ConfirmScreen
from perfconsole.core.reports.ladder import rows
from perfconsole.tui.widgets.sol_bars import sol_table
from perfconsole.tui.widgets.stats_panel import StatsPanel
from helpers import descendants, workers_left
from tests.tui.console_helpers import ROOT, make_app, plain, screen_lines, wait_for

LADDER = ROOT / "tests" / "fixtures" / "ladders" / "ladder_tiny_cpu.json"


async def test_ladder_opens_from_runs_into_grids_with_its_rungs_and_bars():
    app = make_app(snapshots=[LADDER])
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        table = app.query_one("#runs-table")
        assert [plain(c).strip() for c in table.get_row_at(0)][3:5] == ["ok", "7/7 cells"]
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids"
        head = plain(app.query_one("#grids-head", Static).content)
        body = plain(app.query_one("#grids-body", Static).content)
        assert "ladder tiny ctx32 b2 fp32" in head and "7/7 cells finished" in head
        lines = body.splitlines()
        assert lines[0].split()[:3] == ["rung", "status", "step"]
        expected = rows(store.load(LADDER))
        eager = next(line for line in lines if line.startswith("1 eager"))
        assert f"{expected[0].median_ms:,.2f}" in eager and "1.00x" in eager
        assert any(line.startswith("5 cuda-graphs") and "need device cuda" in line for line in lines)
        assert any(line.startswith("8 fp8") and "install perfconsole[fast]" in line for line in lines)   # numbered as the ladder is now
        # Each rung that ran has its speed-of-light bars, floors and fractions; the CPU's busy share is unknown.
        assert body.count("speed of light · GPU busy: not known") == 4
        assert any(line.startswith("Best rung: ") and " ms (" in line for line in lines)
        step_rows = [line.split() for line in lines if line.split()[:1] == ["step"]]
        assert len(step_rows) == 4 and all(r[-1].endswith("%") and "floor" in r for r in step_rows)
        await pilot.press("c")   # no chart for a ladder: said, not drawn
        await pilot.pause()
        assert not app.query_one("#grids-pane").chart


def test_sol_bars_fill_the_floors_share_and_the_stats_name_it():
    run = store.load(LADDER).runs[0]
    sol = run.summary.speed_of_light
    text = plain(sol_table(sol, width=20))
    step = next(line for line in text.splitlines() if line.startswith("step"))
    filled = step.count("█")
    assert filled == round(20 * min(sol["total_ms"]["fraction"], 1.0))
    assert f"{100 * sol['total_ms']['fraction']:.1f}%" in step
    panel = StatsPanel()
    panel.show(run.summary)
    shown = plain(panel.content)
    sol_line = next(line for line in shown.splitlines() if line.startswith("MFU · SoL"))
    assert sol_line.split()[-3:] == ["-", "·", f"{100 * sol['total_ms']['fraction']:.1f}%"]   # no MFU on a CPU
    assert run.summary.gpu_busy_share is None    # a CPU run: no GPU to be busy
    assert next(line for line in shown.splitlines() if line.startswith("GPU busy")).split()[-1] == "-"
    # peaks a step beat: no fraction, and why
    beaten = {**sol, "beaten": ["total_ms"]}
    panel.show(dataclasses.replace(run.summary, speed_of_light=beaten))
    assert next(line for line in plain(panel.content).splitlines() if line.startswith("MFU · SoL")).split()[-2:] == [
        "peaks", "low"]
    assert plain(sol_table(beaten)).startswith("speed of light: the total ran in ")


@pytest.mark.e2e
async def test_the_console_climbs_a_ladder_from_the_form_and_holds_the_gpu_while_it_does(tmp_path, monkeypatch):
    """Run from the command palette, as a user would: the form's config, real rung processes on the CPU."""
    app = _console_on_cpu(tmp_path, monkeypatch, mode="fwd", steps=2)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Run the optimization ladder")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.launch is not None and app.session.grids)
        ladder = app.session.grids[-1]
        assert ladder.kind == "ladder" and app.query_one("#tabs").active == "grids"
        assert all(r.spec.mode == "train" for r in ladder.runs)  # the ladder times train steps
        # The worker climbs its own copy; the drawn ladder fills from the copies it sends.
        assert app.launch.record is not ladder and app.launch.record.id == ladder.id
        await pilot.press("1")
        await pilot.press("ctrl+r")    # the GPU is the ladder's: the run is refused, not started beside it
        await pilot.pause()
        assert app.session.runs == []
        await wait_for(pilot, lambda: app.launch is None, timeout=240)
        assert ladder.status == "ok"
        assert [r.status for r in ladder.runs][:4] == ["ok"] * 4
        assert [r.status for r in ladder.runs][4:] == ["unsupported"] * 4
        saved = list((tmp_path / "snapshots").glob("ladder*.json"))
        assert len(saved) == 1 and store.load(saved[0]).id == ladder.id
        body = plain(app.query_one("#grids-body", Static).content)
        assert "1 eager" in body and "6 bf16-weights" in body and "8 fp8" in body


@pytest.mark.e2e
async def test_quitting_while_a_ladder_climbs_asks_then_ends_it_with_no_process_left(tmp_path, monkeypatch):
    app = _console_on_cpu(tmp_path, monkeypatch, mode="train", steps=500)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.action_run_ladder()
        ladder = app.session.grids[-1]
        await wait_for(pilot, lambda: ladder.runs[0].steps)       # the first rung is measuring
        children = descendants()  # the xdist worker's warm process serves on
        assert children
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.return_code is not None)  # it waits for the rung's last events, exits
    assert app.return_code == 0
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert all(p.status() == psutil.STATUS_ZOMBIE for p in alive)
    time.sleep(2)  # long enough for a next rung to have been started, had the ladder gone on
    assert workers_left() == []


@pytest.mark.e2e
async def test_the_form_with_two_processes_climbs_the_data_parallel_ladder_and_quitting_leaves_no_rank(
        tmp_path, monkeypatch):
    """procs/job 2 on the form: the palette's ladder is the data-parallel one, its first rung a torchrun job after
    its one-process program; quitting mid-rung ends the ranks and the agent with it."""
    from perfconsole.core.grids.rungs import default_rungs

    # The one-process program runs its 40 steps at full speed; rank 0 sleeps 200 ms before each of its steps, so the
    # job is still running when q is pressed (400 plain steps did it before, about 14 CPU-s of the baseline's).
    monkeypatch.setenv("PERFCONSOLE_RANK_FAULT", "0:slow:200")
    app = _console_on_cpu(tmp_path, monkeypatch, mode="train", steps=40, nproc=2, parallel="ddp")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        app.action_run_ladder()
        ladder = app.session.grids[-1]
        assert tuple(ladder.spec.rungs) == default_rungs(ladder.spec.base) and ladder.spec.base.nproc == 2
        assert "ddp" in ladder.spec.rungs and not {"compiled-autograd", "zero"} & set(ladder.spec.rungs)  # opt-in
        assert all(r.spec.scaling for r in ladder.runs)
        await wait_for(pilot, lambda: any("torch.distributed.run" in line for line in _cmdlines()), timeout=240)
        children = descendants()  # the xdist worker's warm process serves on
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(pilot, lambda: app.return_code is not None, timeout=60)
    gone, alive = psutil.wait_procs(children, timeout=15)
    left = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [p.cmdline() for p in left]


def _cmdlines() -> list[str]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            out.append(" ".join(child.cmdline()))
        except psutil.Error:  # gone, or a zombie, between the listing and the read
            continue
    return out


def _console_on_cpu(tmp_path, monkeypatch, **form):
    """The console with a tiny CPU form and its own data directory (the ladder saves there)."""
    # The measured peaks come along from the test's data folder (tests/conftest.py): no rung measures them.
    shutil.copytree(os.environ["PERFCONSOLE_DATA_DIR"], tmp_path, dirs_exist_ok=True)
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(tmp_path))
    return make_app(RunSpec(size="tiny", ctx=16, batch=2, device="cpu", precision="fp32", warmup=1, **form))


def _climbing_ladder():
    """The shipped CPU ladder as it looks while its second rung runs: the first done, the rest waiting."""
    from perfconsole.core.record import RunRecord
    ladder = store.load(LADDER)
    ladder.status = "running"
    for i, r in enumerate(ladder.runs[1:], 1):
        ladder.runs[i] = RunRecord(r.spec, name=r.name)
    ladder.runs[1].status = "running"
    return ladder


def test_a_climbing_ladder_counts_its_running_and_pending_rungs_as_such():
    from perfconsole.tui.glyphs import UNICODE
    from perfconsole.tui.panes.grids import counts_line, ladder_view
    ladder = _climbing_ladder()
    n = len(ladder.runs)
    assert counts_line(ladder) == f"1/{n} cells finished: 1 ok, 1 running, {n - 2} pending"
    lines = plain(ladder_view(ladder, UNICODE)).splitlines()
    assert [line.split()[2] for line in lines[1:n + 1]] == ["ok", "running", *["pending"] * (n - 2)]
    ladder.status, ladder.runs[1].status = "cancelled", "cancelled"      # ctrl+k: the rest will not run
    assert counts_line(ladder) == f"2/{n} cells finished: 1 ok, 1 cancelled, {n - 2} not run"
    lines = plain(ladder_view(ladder, UNICODE)).splitlines()
    assert [" ".join(line.split()[2:4]) for line in lines[2:n + 1]] == ["cancelled -", *["not run"] * (n - 2)]


def test_the_ladder_table_says_a_slower_rung_is_slower_not_a_fraction():
    import re

    from perfconsole.tui.glyphs import UNICODE
    from perfconsole.tui.panes.grids import ladder_view
    body = plain(ladder_view(store.load(LADDER), UNICODE))
    assert "x slower" in body and not re.search(r"(?<![\d.,])0\.\d+x", body), body   # was "0.88x"


async def test_the_ladder_table_keeps_its_columns_at_80x24_and_scrolls_sideways():
    app = make_app(snapshots=[LADDER])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("7")
        await pilot.pause()
        pane = app.query_one("#grids-pane")
        shown = "\n".join(screen_lines(app))
        assert "rung           status" in shown and "1 eager" in shown and "…" not in shown
        assert "Best rung: 3 compile" in shown      # the lines under the table wrap to the pane
        assert pane.max_scroll_x > 0
        await pilot.press("right", "right", "right")
        await pilot.pause()
        assert pane.scroll_x > 0
        pane.scroll_to(x=pane.max_scroll_x, animate=False)   # the far right: the last column whole
        await pilot.pause()
        assert "moved ms/step" in "\n".join(screen_lines(app))


async def test_a_rung_that_carries_a_left_out_rung_s_change_names_it_in_grids(tmp_path):
    """`--rungs eager,sdpa,fused-adamw`: the fused-AdamW rung ran compiled too, and Grids said nothing of it."""
    from perfconsole.core.grids.ladder import LadderRecord, LadderSpec

    recorded = store.load(LADDER)
    runs = dict(zip(recorded.spec.rungs, recorded.runs))
    names = ("eager", "sdpa", "fused-adamw")
    path = tmp_path / "picked.json"
    store.save(LadderRecord(LadderSpec(recorded.spec.base, names), [runs[n] for n in names], status="ok"), path)
    app = make_app(snapshots=[path])
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("5", "enter")
        await wait_for(pilot, lambda: app.query_one("#tabs").active == "grids")
        lines = plain(app.query_one("#grids-body", Static).content).splitlines()
    fused = next(line for line in lines if line.startswith("4 "))
    assert fused.startswith("4 fused-adamw +compile ") and "3.91x slower" in fused
    assert next(line for line in lines if line.startswith("2 ")).split()[:3] == ["2", "sdpa", "ok"]
    assert "4 fused-adamw's vs prev is over 2 sdpa, so it includes compile's change too" in lines
    assert "+name after a rung: a rung left out, whose change it carries too" in lines


DP_LADDER = ROOT / "tests" / "fixtures" / "ladders" / "dp_ladder_2.7B_2xh200.json"  # docs/results/dp_ladder_2xh200.md


async def test_a_data_parallel_ladder_shows_each_rungs_job_beside_one_gpu_as_bars():
    app = make_app(snapshots=[DP_LADDER])
    async with app.run_test(size=(200, 70)) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids"
        body = plain(app.query_one("#grids-body", Static).content)
        lines = body.splitlines()
        assert "weak scaling over 2 processes" in lines
        view = next(i for i, line in enumerate(lines) if line.startswith("3 bucket-view") and "1 GPU" in line)
        assert "146.0 ms" in lines[view]
        assert "2 GPUs" in lines[view + 1] and "176.8 ms" in lines[view + 1] and "exposed 28.8 ms" in lines[view + 1]
        assert "weak scaling 82.6%" in lines[view + 1]
        fsdp = next(i for i, line in enumerate(lines) if line.startswith("11 fsdp") and "1 GPU" in line)  # numbered as now
        assert "not separated" in lines[fsdp + 1]

"""Sweeps and attention grids in the console: listed in Runs, shown as grids, toggled, exported, saved.

On the real H200 snapshots in tests/fixtures/grids/ (a full fp32/bf16 train sweep, the eager vs
compiled vs SDPA comparison, and a partial attention grid with OOM, cancelled and not-run cells)
and on the shipped tiny CPU sweep."""
from __future__ import annotations

import csv
import io
import json

from console_helpers import ROOT, make_app, plain, shipped
from textual.widgets import Static

from perfconsole.core import store
from perfconsole.core.reports import export
from perfconsole.core.paths import data_dir
from perfconsole.core.reports.sweep import GridCell
from perfconsole.tui.actions import snapshot_choices
from perfconsole.tui.screens.dialogs import ConfirmScreen, ExportScreen, OpenScreen
from perfconsole.tui.panes.grids import cell_text

GRIDS = ROOT / "tests" / "fixtures" / "grids"
SWEEP = GRIDS / "sweep_train_fp32_bf16.json"
ATTENTION = GRIDS / "attention_grid.json"


def _text(app, selector: str) -> str:
    return plain(app.query_one(selector, Static).content)


def _row(body: str, label: str, nth: int = 0) -> list[str]:
    """The cells of the nth table row whose first cell is `label`."""
    rows = [line.split() for line in body.splitlines() if line.split()[:1] == [label]]
    return rows[nth][1:]


async def test_sweep_opens_from_runs_into_grids_and_toggles_its_values():
    app = make_app(snapshots=[SWEEP])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        table = app.query_one("#runs-table")
        assert table.row_count == 1
        assert [plain(c).strip() for c in table.get_row_at(0)][3:5] == ["ok", "40/40 cells"]
        assert "0 runs, 1 grid " in _text(app, "#runs-title")
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids" and app.focused is app.query_one("#grids-pane")
        head, body = _text(app, "#grids-head"), _text(app, "#grids-body")
        assert "cells: mean step time (ms)" in head and "40/40 cells finished: 40 ok" in head
        assert "train · fp32" in body and "train · bf16" in body
        assert body.splitlines()[1].split() == ["size", "\\", "ctx", "128", "256", "512", "1024"]
        # The same means as the Markdown report of this sweep (docs/results/sweep_train_fp32_bf16.md).
        assert _row(body, "2.7B") == ["291.35", "529.18", "1,009.40", "2,060.08"]
        assert _row(body, "2.7B", 1) == ["162.93", "195.18", "220.56", "360.47"]
        findings = _text(app, "#grids-findings")
        assert "bf16 speedup over fp32 per size" in findings and "2.7B 3.36x" in findings
        assert "no cell ran out of memory" in findings

        await pilot.press("t")
        await pilot.pause()
        assert "cells: tokens/s" in _text(app, "#grids-head")
        assert _row(_text(app, "#grids-body"), "small") == ["11,616", "20,746", "36,929", "39,007"]
        await pilot.press("t")
        await pilot.pause()
        assert "cells: peak allocated (MiB)" in _text(app, "#grids-head")
        assert _row(_text(app, "#grids-body"), "2.7B", 1) == ["52,372", "52,795", "62,674", "92,457"]
        await pilot.press("t")
        await pilot.pause()
        assert "cells: mean step time (ms)" in _text(app, "#grids-head")


async def test_partial_attention_grid_marks_oom_cancelled_and_not_run_cells():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("5", "o")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        app.screen.query_one("#open-path").value = str(ATTENTION)
        app.screen.query_one("#open-path").focus()
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids"
        head, body = _text(app, "#grids-head"), _text(app, "#grids-body")
        assert "22/48 cells finished: 18 ok, 3 OOM, 1 cancelled, 26 not run" in head
        assert "naive · fp32" in body and "sdpa · fp32" in body
        assert _row(body, "16") == ["0.41/0.71", "0.36/0.94", "2.02/3.21", "8.43/11.5", "28.9/44.6", "OOM"]
        assert _row(body, "64")[-1] == "OOM"
        assert " ".join(_row(body, "128")) == "0.30/0.94 0.57/0.97 3.04/5.24 cancelled not run not run"
        assert " ".join(_row(body, "16", 1)) == " ".join(["not run"] * 6)
        assert "naive fp32 runs out of memory: d 16 from seq 32768" in _text(app, "#grids-findings")

        await pilot.press("t")
        await pilot.pause()
        assert "cells: memory before backward (MiB)" in _text(app, "#grids-head")
        assert _row(_text(app, "#grids-body"), "16") == ["67", "100", "602", "2,196", "8,552", "OOM"]
        # At 80x24 the grid scrolls to its findings from the keyboard.
        pane = app.query_one("#grids-pane")
        assert pane.max_scroll_y > 0
        await pilot.press("end")
        await pilot.pause()
        assert pane.scroll_y == pane.max_scroll_y


def test_status_cells_carry_a_word_and_a_colour():
    oom = cell_text(GridCell("oom", (None, None)), "fwd_bwd_ms")
    assert (oom.plain, str(oom.style)) == ("OOM", "bold red")
    partial = cell_text(GridCell("oom", (28.906, None)), "fwd_bwd_ms")
    assert partial.plain == "28.9/OOM"  # ran out of memory in the backward, after the forward fit
    assert cell_text(GridCell("not_run", (None,)), "step_ms").plain == "not run"
    assert cell_text(GridCell("error", (None,)), "step_ms").plain == "error"
    assert cell_text(GridCell("ok", (1382.661,)), "step_ms").plain == "1,382.66"


async def test_export_a_grid_from_grids_and_from_runs():
    app = make_app(snapshots=[ATTENTION])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("7", "e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("f2", "enter")
        await pilot.pause()
        out = sorted((data_dir() / "exports").glob("*.csv"))
        assert len(out) == 1
        rows = list(csv.DictReader(io.StringIO(out[0].read_text())))
        assert len(rows) == 48 and [r["status"] for r in rows].count("oom") == 3
        assert [r["status"] for r in rows].count("not_run") == 26
        # From the Runs list, Markdown and JSON, like a run.
        await pilot.press("5", "e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("enter")
        await pilot.pause()
        md = sorted((data_dir() / "exports").glob("*.md"))
        # The same report as `perfconsole export` gives for this snapshot.
        assert len(md) == 1 and md[0].read_text() == export.export(store.load(ATTENTION), "md")
        await pilot.press("e", "f3", "enter")
        await pilot.pause()
        doc = json.loads(sorted((data_dir() / "exports").glob("*.json"))[0].read_text())
        assert doc["kind"] == "attention" and len(doc["cells"]) == 48


async def test_save_mark_and_delete_a_grid():
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), SWEEP])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("5", "down", "space")
        await pilot.pause()
        assert app.session.marked == []  # a grid is not compared with runs
        assert any("grids are not compared" in str(n.message) for n in app._notifications)
        await pilot.press("s")
        await pilot.pause()
        saved = sorted((data_dir() / "snapshots").glob("sweep-*.json"))
        assert len(saved) == 1
        assert store.load(saved[0]).to_dict() == store.load(SWEEP).to_dict()
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        assert app.session.grids == [] and app.session.shown_grid is None and len(app.session.runs) == 1
        assert saved[0].exists()  # the file came from the fixtures, not the data directory
        assert "open a sweep, an attention grid, a ladder or a scaling curve" in _text(app, "#grids-head")


async def test_shipped_tiny_cpu_sweep_opens_from_the_open_dialog():
    path = shipped("tiny-cpu-sweep.json")
    sweep = store.load(path)
    assert {r.environment["host"] for r in sweep.runs} == {"example-host"}
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("5", "o")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        await pilot.press("tab")                   # from the path field to the list
        for _ in range(snapshot_choices().index(path)):
            await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids" and app.session.shown_grid.id == sweep.id
        body = _text(app, "#grids-body")
        for nth, prec in enumerate(("fp32", "bf16")):
            means = [r.summary.total_ms.mean for r in sorted(sweep.runs, key=lambda r: r.spec.ctx)
                     if r.spec.precision == prec]
            assert _row(body, "tiny", nth) == [f"{m:,.2f}" for m in means]


async def test_grid_commands_in_the_palette_and_keys_in_help():
    app = make_app(snapshots=[ATTENTION])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        titles = {c.title: c for c in app.get_system_commands(app.screen)}
        assert {"Show Grids", "Switch grid values", "Export the grid", "Save the grid"} <= set(titles)
        titles["Switch grid values"].callback()
        await pilot.pause()
        assert "cells: memory before backward (MiB)" in _text(app, "#grids-head")
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = "".join(plain(s.content) for s in app.screen.query(Static))
        assert "Grids" in help_text and "Values" in help_text


async def test_eager_compiled_and_sdpa_side_by_side():
    """The H200 compile comparison (docs/results/attention_compile.md): three variants, one grid each."""
    app = make_app(snapshots=[GRIDS / "attention_compile.json"])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("5", "enter")
        await pilot.pause()
        assert app.query_one("#tabs").active == "grids"
        head, body = _text(app, "#grids-head"), _text(app, "#grids-body")
        assert "18/18 cells finished: 18 ok" in head
        assert all(f"{v} · fp32" in body for v in ("naive", "naive+compile", "sdpa"))
        assert _row(body, "64", 1) == ["0.20/0.35", "1.32/2.03", "20.5/34.4"]  # naive+compile, d 64
        findings = _text(app, "#grids-findings")
        assert "naive+compile against naive: speedup 1.47x" in findings
        assert "sdpa against naive: speedup 2.09x" in findings

"""The console's charts: the GPU panel's sparklines, a grid as a chart (`c` in Grids) and the compare
pane's step-time box plots, at 80x24 and 120x34, with Unicode and with ASCII glyphs.

The shipped H200 sweep ran every cell, so the chart's gap is tested on a copy in which its largest
cell (2.7B, fp32, ctx 1024) ran out of memory; the partial attention grid has real OOM cells."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from console_helpers import ROOT, make_app, plain, shipped, wait_for

from perfconsole.core import store
from perfconsole.core.telemetry.nvml import GpuSample
from perfconsole.tui.glyphs import ASCII, UNICODE
from perfconsole.tui.panes.live import LivePane
from perfconsole.tui.widgets.grid_chart import ASCII_CHART, UNICODE_CHART

GRIDS = ROOT / "tests" / "fixtures" / "grids"
SWEEP = GRIDS / "sweep_train_fp32_bf16.json"
ATTENTION = GRIDS / "attention_grid.json"
EXAMPLES = ["tiny-cpu-train-fp32.json", "tiny-cpu-train-bf16.json", "tiny-cpu-fwd-ctx64.json"]
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 34), id="120x34")]
SERIES = ["small", "medium", "large", "xl", "2.7B"]


def history(n: int = 40) -> tuple[GpuSample, ...]:
    """A made-up minute of a busy H100: utilisation, clock, power and memory each change, so each
    sparkline has a shape and a min and max that differ."""
    return tuple(GpuSample(0, "NVIDIA H100 80GB HBM3", float(i), util_pct=float(40 + (i * 7) % 61),
                           mem_used_mib=30_000.0 + 250 * i, mem_total_mib=81_559.0, power_w=200.0 + 12 * i,
                           temp_c=61.0, sm_clock_mhz=1_410.0 + 15 * i) for i in range(n))


def sweep_with_oom(tmp_path: Path) -> Path:
    """The shipped sweep, with its 2.7B fp32 ctx 1024 cell turned into the OOM it would be on a smaller GPU."""
    doc = json.loads(SWEEP.read_text())
    for r in doc["data"]["runs"]:
        s = r["spec"]
        if (s["size"], s["precision"], s["ctx"]) == ("2.7B", "fp32", 1024):
            r.update(status="oom", steps=[], warmup_steps=[], summary=None,
                     error={"kind": "oom", "message": "CUDA out of memory", "detail": ""})
    path = tmp_path / "sweep_with_oom.json"
    path.write_text(json.dumps(doc))
    return path


def plot_rows(text: str) -> list[str]:
    """The chart's plot area: the lines between its title and its x axis."""
    lines = text.splitlines()
    axis = next(i for i, line in enumerate(lines) if set(line.strip()) <= set("└─┬+-"))
    return lines[1:axis]


async def show_gpu(pilot, sample, hist) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: "no GPU" in plain(app.main("#gpu").content))  # the sampler's one message
    app.main(LivePane).show_gpu(sample, hist)
    await pilot.pause()


# --- the GPU panel ------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_gpu_panel_shows_four_sparklines_with_last_values_units_and_range(size):
    hist = history()
    last = hist[-1]
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await pilot.press("2")
        await show_gpu(pilot, last, hist)
        text = plain(app.main("#gpu").content)
        assert "NVIDIA H100 80GB HBM3" in text and "no GPU" not in text
        lines = text.splitlines()
        values = {"util": "69 %", "SM": "1,995 MHz", "power": "668 W", "mem": "39,750 MiB"}
        for label, value in values.items():
            line = next(line for line in lines if line.split()[:1] == [label])
            assert value in line
        spark = set(UNICODE.spark)
        if size == (80, 24):
            # One line per metric: value, sparkline, lowest-highest.
            for label, rng in (("util", "40-100"), ("SM", "1410-1995"), ("power", "200-668"), ("mem", "30k-40k")):
                line = next(line for line in lines if line.split()[:1] == [label])
                assert line.split()[3] and set(line.split()[3]) <= spark and line.split()[4] == rng
        else:
            # Two lines per metric: value with min and max, then the sparkline across the panel.
            for label, rng in (("util", "40-100 %"), ("SM", "1410-1995 MHz"), ("power", "200-668 W"),
                               ("mem", "30k-40k MiB")):
                i = next(i for i, line in enumerate(lines) if line.split()[:1] == [label])
                assert lines[i].rstrip().endswith(rng)
                assert len(lines[i + 1].strip()) >= 20 and set(lines[i + 1].strip()) <= spark
            assert "memory total 81,559 MiB" in text


async def test_gpu_panel_says_no_gpu_and_draws_ascii_in_ascii_mode():
    app = make_app(ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await show_gpu(pilot, history()[-1], history())
        text = plain(app.main("#gpu").content)
        assert text.isascii() and any(ch in text for ch in ASCII.spark[1:])
        app.main(LivePane).show_gpu(None, ())
        await pilot.pause()
        assert plain(app.main("#gpu").content).strip() == "no GPU (NVML found no device)"


# --- grids as charts ----------------------------------------------------------------------------

async def test_sweep_chart_has_one_series_per_size_and_marks_the_oom_gap(tmp_path):
    app = make_app(snapshots=[sweep_with_oom(tmp_path)])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        pane, chart = app.query_one("#grids-pane"), app.query_one("#grids-chart")
        assert not chart.display and app.query_one("#grids-body").display
        await pilot.press("c")
        await pilot.pause()
        assert chart.display and not app.query_one("#grids-body").display
        text = chart.render().plain
        lines = text.splitlines()
        assert lines[0].startswith("train · fp32: mean step time (ms) against ctx (tokens)")
        legend = next(line for line in lines if line.startswith("size:"))
        markers = UNICODE_CHART.markers
        assert legend.split() == ["size:", *(x for i, s in enumerate(SERIES) for x in (markers[i], s))]
        # Four points per size, three for 2.7B: its ctx 1024 cell ran out of memory and is a gap.
        plot = "".join(plot_rows(text))
        assert [plot.count(markers[i]) for i in range(len(SERIES))] == [4, 4, 4, 4, 3]
        assert "gaps OOM: 2.7B ctx 1024" in text
        assert "1 OOM" in plain(app.query_one("#grids-head").content)
        # `t` follows the values the tables show; `n` moves to the bf16 table, which has no gap.
        await pilot.press("t")
        await pilot.pause()
        assert chart.render().plain.startswith("train · fp32: tokens/s")
        await pilot.press("n")
        await pilot.pause()
        text = chart.render().plain
        assert text.startswith("train · bf16: tokens/s") and "gaps" not in text
        assert "chart 2/2" in plain(app.query_one("#grids-head").content)
        # And back to the tables.
        await pilot.press("c")
        await pilot.pause()
        assert not chart.display and app.query_one("#grids-body").display and not pane.has_class("-chart")
        assert "cells: tokens/s" in plain(app.query_one("#grids-head").content)
        assert "train · fp32" in plain(app.query_one("#grids-body").content)


async def test_attention_chart_sums_forward_and_backward_and_names_its_gaps():
    app = make_app(snapshots=[ATTENTION])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("7", "c")
        await pilot.pause()
        text = app.query_one("#grids-chart").render().plain
        assert text.startswith("naive · fp32: forward + backward (ms) against seq (tokens)")
        assert "d: ● 16  ■ 32  ▲ 64  ◆ 128" in text
        assert "OOM: 16 seq 32768, 32 seq 32768, 64 seq 32768" in text and "cancelled: 128 seq 8192" in text
        # The highest tick is the slowest cell: d 64 at seq 16384, forward + backward.
        assert plot_rows(text)[0].split()[0] == "91.2"
        await pilot.press("n")
        await pilot.pause()
        text = app.query_one("#grids-chart").render().plain
        assert "no cell of this table has a value" in text and "not run: 24 cells" in text


# --- compare: step-time distributions -----------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_compare_shows_each_runs_step_time_spread_and_median(size):
    runs = [store.load(shipped(n)) for n in EXAMPLES]
    app = make_app(snapshots=[shipped(n) for n in EXAMPLES])
    async with app.run_test(size=size) as pilot:
        await pilot.press("5", "space", "down", "space", "down", "space", "c")
        await pilot.pause()
        assert app.query_one("#tabs").active == "compare"
        dist = app.query_one("#compare-dist")
        text = dist.render().plain
        lines = text.splitlines()
        assert lines[0] == "Step time distribution (measured steps, total ms)"
        marks = []
        for i, r in enumerate(runs):
            median = statistics.median(s.total_ms for s in r.steps if not s.warmup)
            row = next(line for line in lines if line.startswith(f"{i + 1} "))  # runs are numbered from 1
            assert row.rstrip().endswith(f"median {median:,.3f} ms")
            assert row.count("┃") == 1
            marks.append(row.index("┃"))
        # One shared axis: the medians (21.7, 101.8, 315.1 ms) sit left to right in that order.
        assert marks == sorted(marks) and len(set(marks)) == 3
        assert lines[-1].rstrip().endswith(" ms") and max(len(line) for line in lines) <= size[0]
        assert dist.region.height == 4 + len(runs)


# --- 80x24 and ASCII ----------------------------------------------------------------------------

async def test_every_chart_renders_at_80x24_in_ascii(tmp_path):
    app = make_app(snapshots=[*(shipped(n) for n in EXAMPLES[:2]), sweep_with_oom(tmp_path), ATTENTION],
                   ascii_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await show_gpu(pilot, history()[-1], history())
        assert plain(app.main("#gpu").content).isascii()
        await pilot.press("5", "space", "down", "space", "c", "end")
        await pilot.pause()
        text = app.query_one("#compare-dist").render().plain
        rows = [line for line in text.splitlines() if line[:2] in ("1 ", "2 ")]
        assert text.isascii() and len(rows) == 2 and all("|" in r and " ms" in r for r in rows)
        texts: dict[str, list[str]] = {}
        for row in (2, 3):  # the runs list holds the two runs, then the two grids
            await pilot.press("5")
            app.query_one("#runs-table").move_cursor(row=row)
            await pilot.press("enter", *(("c",) if row == 2 else ()))
            for keys in ((), ("t", "n")):
                await pilot.press(*keys)
                await pilot.pause()
                assert app.query_one("#tabs").active == "grids"
                texts.setdefault(app.session.shown_grid.kind, []).append(app.query_one("#grids-chart").render().plain)
        assert all(t.isascii() for ts in texts.values() for t in ts)
        sweep, attention = texts["sweep"][0], texts["attention"][0]
        assert "size: o small  x medium  + large  * xl  # 2.7B" in sweep and "gaps OOM: 2.7B ctx 1024" in sweep
        assert "OOM: 16 seq 32768" in attention and ASCII_CHART.markers[0] in "".join(plot_rows(attention))
        assert all(len(line) <= 80 for ts in texts.values() for t in ts for line in t.splitlines())


# --- snapshots ----------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_snapshot_sweep_chart(snap_compare, size, tmp_path):
    app = make_app(snapshots=[sweep_with_oom(tmp_path)])
    assert snap_compare(app, terminal_size=size, press=["7", "c"])


def test_snapshot_attention_chart_ascii(snap_compare):
    app = make_app(snapshots=[ATTENTION], ascii_only=True)
    assert snap_compare(app, terminal_size=(80, 24), press=["7", "c"])


def test_snapshot_gpu_panel_history(snap_compare):
    async def before(pilot):
        await pilot.press("2")
        await show_gpu(pilot, history()[-1], history())
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=before)


def test_an_ok_cell_without_a_value_is_no_value_not_an_error():
    from perfconsole.core.reports import sweep as report_sweep
    from perfconsole.tui.panes.grids import STATUS_STYLE, STATUS_WORD
    from perfconsole.tui.widgets.grid_chart import legend
    sweep = store.load(shipped("tiny-cpu-sweep.json"))     # a CPU sweep: no peak allocated memory
    table = report_sweep.grid_tables(sweep, "peak_mib")[0]
    assert all(c.status == "ok" for row in table.cells for c in row)
    text = "\n".join(line.plain for line in legend(table, 80, UNICODE_CHART, STATUS_WORD, STATUS_STYLE))
    assert "gaps no value: tiny ctx 32, tiny ctx 64" in text and "error" not in text

"""Kernel and NVTX tables on real profiler output; marking and comparing; save, reopen and export."""
from __future__ import annotations

from console_helpers import ROOT, fixture_profile_record, make_app, plain, screen_lines, shipped
from textual.widgets import Input, Static

from perfconsole.core.paths import data_dir
from perfconsole.tui.screens.dialogs import ExportScreen, OpenScreen
from perfconsole.tui.widgets.sortable_table import SortableTable


async def _view(app, pilot, record) -> None:
    app.session.add(record)
    app.session.show(record)
    app.show_current()
    app.refresh_runs()
    await pilot.pause()


async def test_kernel_table_sorts_numerically_both_ways_and_filters():
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        await _view(app, pilot, fixture_profile_record())
        await pilot.press("3")
        await pilot.pause()
        table = app.query_one("#kernel-table", SortableTable)
        assert len(table.shown) == 238 and table.row_count == 238
        # Cursor on "total ms" (first column: numbers come before names), s: largest first; s again: smallest first.
        table.move_cursor(column=0)
        await pilot.press("s")
        totals = [r["total_time_ns"] for r in table.shown]
        assert totals == sorted(totals, reverse=True) and totals[0] == 316902963
        await pilot.press("s")
        totals = [r["total_time_ns"] for r in table.shown]
        assert totals == sorted(totals)
        # Numerically, not as text: "instances" holds values with different digit counts.
        table.move_cursor(column=1)
        await pilot.press("s")
        counts = [r["instances"] for r in table.shown]
        assert counts == sorted(counts, reverse=True) and len(str(counts[0])) != len(str(counts[-1]))
        table.move_cursor(column=5)
        await pilot.press("s")
        names = [r["name"].lower() for r in table.shown]
        assert names == sorted(names)
        # Text filter, then a category on top of it.
        await pilot.press("slash")
        await pilot.press(*"nccl")
        await pilot.pause()
        assert table.shown and all("nccl" in r["name"].lower() for r in table.shown)
        assert len(table.shown) < 238
        await pilot.press("enter")
        app.query_one("#kernel-filter", Input).value = ""
        await pilot.pause()
        app.query_one("#kernel-category").value = "matmul"
        await pilot.pause()
        assert table.shown and {r["category"] for r in table.shown} == {"matmul"}
        bars = plain(app.query_one("#kernel-bars", Static).content)
        assert "communication" in bars and "matmul" in bars and "%" in bars


async def test_nvtx_ranges_and_the_kernels_inside_a_range():
    app = make_app(snapshots=[shipped("tiny-cpu-train-torch-profile.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("5", "enter", "4")
        await pilot.pause()
        nvtx = app.query_one("#nvtx-table", SortableTable)
        ranges = [r["range"] for r in nvtx.shown]
        assert "forward" in ranges
        nvtx.move_cursor(row=ranges.index("forward"))
        await pilot.pause()
        inside = app.query_one("#range-kernels", SortableTable)
        assert inside.shown and any(r["name"] == "aten::mm" for r in inside.shown)
        assert "CPU ops in forward" in plain(app.query_one("#range-title", Static).content)
        # nsys fixture without nvtx_kern_sum: the table says why no kernels show.
        await _view(app, pilot, fixture_profile_record())
        await pilot.press("4")
        await pilot.pause()
        nvtx.move_cursor(row=1)
        await pilot.pause()
        assert "no nvtx_kern_sum table" in plain(app.query_one("#range-title", Static).content)
        nvtx.move_cursor(column=0)
        await pilot.press("s")
        totals = [r["total_time_ns"] for r in nvtx.shown]
        assert totals == sorted(totals, reverse=True) and len(totals) == 56


async def test_mark_two_runs_and_compare():
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), shipped("tiny-cpu-train-bf16.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("5", "space", "down", "space", "c")
        await pilot.pause()
        assert app.query_one("#tabs").active == "compare"
        c = app.session.compared
        assert [r.spec.precision for r in c.runs] == ["fp32", "bf16"]
        text = plain(app.query_one("#compare-body", Static).content)
        assert "Spec differences" in text and "precision" in text and "bf16" in text
        sp = c.speedups()[1]
        assert ("no significant difference" in text) == (not sp.significant)
        assert f"{c.runs[1].summary.tokens_per_s:,.0f}" in text


async def test_compare_says_why_tokens_per_s_and_the_speedup_differ_between_processes(tmp_path):
    # The screen showed tokens/s 1.56x apart beside "no significant difference (1.09x, 95% CI [0.00, 1858.54])".
    from perfconsole.core import events as ev
    from perfconsole.core import store
    from perfconsole.core.record import RunRecord
    from perfconsole.core.settings import RunSpec
    from perfconsole.core.run_summary import compute_summary

    paths = []
    for name, processes in (("fp32", [[100.0, 100.0, 100.0, 900.0], [100.0] * 4]), ("bf16", [[80.0] * 4] * 2)):
        spec = RunSpec(size="tiny", device="cpu", precision=name, steps=4, repeat=2)
        r = RunRecord(spec)
        for i, times in enumerate(processes):
            r.apply(ev.Replicate(i, 2))
            steps = [ev.Step(k, False, t, t / 2, t / 4, t / 4) for k, t in enumerate(times)]
            for step in steps:
                r.apply(step)
            r.apply(ev.SummaryReady(compute_summary(spec, steps, [], None).to_dict()))
        r.apply(ev.Finished("ok"))
        paths.append(store.save(r, tmp_path / f"{name}.json"))
    app = make_app(snapshots=paths)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("5", "space", "down", "space", "c")
        await pilot.pause()
        text = " ".join(plain(app.query_one("#compare-body", Static).content).split())
        assert "1.25x faster (too few processes for an interval: 2 a side, 3 needed)" in text
        assert " ".join(app.session.compared.throughput_note().split()) in text
        assert "run 2: 2.50x faster by tokens/s, 1.25x faster by the speedup" in text


async def test_compare_needs_two_marked_runs():
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        await pilot.press("5", "space", "c")
        await pilot.pause()
        assert app.session.compared is None and app.query_one("#tabs").active == "runs"


async def test_save_reopen_and_export():
    app = make_app(snapshots=[shipped("tiny-cpu-fwd-ctx64.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        original = app.session.runs[0]
        await pilot.press("5", "s")
        await pilot.pause()
        saved = sorted((data_dir() / "snapshots").glob("*.json"))
        assert len(saved) == 1
        # Delete it from the list: its file is the shipped one it was opened from, outside the data dir, so the
        # copy saved in the data dir stays...
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert app.session.runs == [] and saved[0].exists()
        # ...and open it again through the dialog.
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        await pilot.press("tab", "enter")  # from the path to the list; its first choice: the data dir's snapshot
        await pilot.pause()
        assert [r.id for r in app.session.runs] == [original.id]
        assert app.session.runs[0].to_dict() == original.to_dict()
        # Export as CSV (F2) to the default place in the data dir.
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        await pilot.press("f2", "enter")
        await pilot.pause()
        out = sorted((data_dir() / "exports").glob("*.csv"))
        assert len(out) == 1
        lines = out[0].read_text().splitlines()
        assert lines[0].startswith("run,size,ctx") and len(lines) == 1 + 2 + 8
        # Compare two runs and export that as Markdown.
        await pilot.press("o")
        await pilot.pause()
        app.screen.query_one("#open-path", Input).value = str(shipped("tiny-cpu-train-fp32.json"))
        app.screen.query_one("#open-path", Input).focus()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("5", "space", "down", "space", "c", "e")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        md = sorted((data_dir() / "exports").glob("*.md"))
        assert len(md) == 1 and md[0].read_text().startswith("# Comparison:")


async def test_opening_a_damaged_file_says_why_and_keeps_the_session(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    app = make_app(snapshots=[shipped("tiny-cpu-fwd-ctx64.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        app.open_path(bad)
        await pilot.pause()
        assert len(app.session.runs) == 1
        assert any("not a perfconsole snapshot" in str(n.message) for n in app._notifications)


async def test_the_kernels_pane_says_where_kernel_time_went_and_what_profiling_cost():
    from perfconsole.core import store

    record = store.load(shipped("../tests/fixtures/nsys_perfconsole/h200_2.7B_compiled_nsys_run.json"))
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _view(app, pilot, record)
        await pilot.press("3")
        await pilot.pause()
        title = str(app.query_one("#kernels-title", Static).content)
        shown = screen_lines(app)
    assert " kernels (nsys)" in title    # GPU kernels; a CPU run's torch profile has CPU ops (below)
    # The figures are the profiler's kernel-time sums, not the timed phases Live shows (this run's timed forward:
    # median 29.362 ms); "the quiet step" says what it is. Each line whole on an 80-column screen, none wrapped.
    said = ["the profiler's kernel-time sums per step for each phase (0.0% in no phase):",
            "forward 27.179 ms, backward 51.677 ms, optimizer 27.241 ms",
            "a profiled step took 1.01x the quiet step (the step timed without the profiler)"]
    assert title.splitlines()[1:] == said
    assert [line.rstrip() for line in shown[3:6]] == said, shown[:8]


async def test_a_cpu_profile_s_rows_are_called_cpu_ops():
    """On a CPU run the torch profiler's rows are CPU ops by self time: the titles said "kernels"."""
    from perfconsole.core import store

    cpu = store.load(ROOT / "tests" / "fixtures" / "ladders" / "ladder_tiny_cpu.json").runs[0]
    n = len(cpu.profile.tables["cuda_gpu_kern_sum"])
    async with make_app().run_test(size=(120, 34)) as pilot:
        await _view(pilot.app, pilot, cpu)
        titles = {}
        for key, title in (("3", "#kernels-title"), ("4", "#nvtx-title"), ("down", "#range-title")):
            await pilot.press(key)
            await pilot.pause()
            titles[title] = plain(pilot.app.query_one(title, Static).content)
            if key == "3":
                table = pilot.app.query_one("#kernel-table")
                heads = [str(c.label).strip() for c in table.columns.values()]
                placeholder = pilot.app.query_one("#kernel-filter").placeholder
        inside = pilot.app.query_one("#range-kernels")
        range_heads = [str(c.label).strip() for c in inside.columns.values()]
        assert inside.row_count
        # A GPU run's ranges hold kernels, and its table says so again after the CPU run's.
        await _view(pilot.app, pilot, store.load(ROOT / "tests" / "fixtures" / "nsys_perfconsole" /
                                                 "h200_2.7B_compiled_nsys_run.json"))
        await pilot.press("4")
        await pilot.pause()
        gpu_inside = pilot.app.query_one("#range-kernels")
        gpu_heads = [str(c.label).strip() for c in gpu_inside.columns.values()]
        assert gpu_inside.row_count
    assert f"{cpu.name}: {n} CPU ops (torch)" in titles["#kernels-title"]
    assert "to see its CPU ops" in titles["#nvtx-title"]
    assert titles["#range-title"].startswith("CPU ops in ")
    assert heads[-1] == "CPU op" and placeholder == "filter CPU ops by text (/)"   # the table says so too
    assert range_heads[-1] == "CPU op in range", range_heads                      # and the range's table: was "kernel"
    assert gpu_heads[-1] == "kernel in range", gpu_heads


async def test_live_status_flags_a_throttled_run():
    import json

    from perfconsole.core.telemetry.gpu_summary import Telemetry

    doc = json.loads((shipped("../tests/fixtures/telemetry/h200_power_capped.json")).read_text())
    record = fixture_profile_record()
    record.telemetry = Telemetry.from_samples(doc["samples"], doc["period_s"]).to_dict()
    app = make_app()
    async with app.run_test(size=(120, 34)) as pilot:
        await _view(app, pilot, record)
        await pilot.press("2")
        await pilot.pause()
        status = str(app.query_one("#live-status", Static).content)
        assert "SM clock fell 14.4%" in status and "sw_power_cap" in status


async def test_export_asks_before_overwriting_a_file_and_n_goes_back_to_the_dialog(tmp_path):
    target = tmp_path / "run.md"
    target.write_text("keep me\n")
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        app.screen.query_one("#export-path", Input).value = str(target)
        for answer in ("n", "y"):
            await pilot.press("enter")
            await pilot.pause()
            assert "exists. Overwrite it?" in plain(app.screen.query_one(Static).content)
            await pilot.press(answer)
            await pilot.pause()
            if answer == "n":  # back in the dialog, the path as typed, the file as it was
                assert isinstance(app.screen, ExportScreen)
                assert app.screen.query_one("#export-path", Input).value == str(target)
                assert target.read_text() == "keep me\n"
        assert not isinstance(app.screen, ExportScreen)
        assert target.read_text().startswith("# tiny ctx32")


async def test_a_filter_that_matches_nothing_says_so():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _view(app, pilot, fixture_profile_record())
        await pilot.press("3")
        await pilot.press("slash")
        await pilot.press(*"zzqq")
        await pilot.pause()
        assert "no kernel matches 'zzqq'" in plain(app.query_one("#kernels-title", Static).content)
        await pilot.press("backspace", "backspace", "backspace", "backspace")
        await pilot.pause()
        assert "no kernel matches" not in plain(app.query_one("#kernels-title", Static).content)
        await pilot.press("escape", "4", "slash", *"zzqq")
        await pilot.pause()
        assert "no range matches 'zzqq'" in plain(app.query_one("#range-title", Static).content)


async def test_an_empty_category_says_how_out_of_it_and_only_that():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _view(app, pilot, fixture_profile_record())
        await pilot.press("3", "g", "g")                      # all -> matmul -> attention: none in this profile
        await pilot.pause()
        title = plain(app.query_one("#kernels-title", Static).content)
        assert "no kernel matches category attention (g: the next category)" in title
        assert "/" not in title.split("no kernel matches")[1]   # no text filter is set to clear
        await pilot.press("slash", *"zzqq")
        await pilot.pause()
        title = plain(app.query_one("#kernels-title", Static).content)
        assert "'zzqq' and category attention (clear the text: /, then delete it; g: the next category)" in title


async def test_compare_numbers_runs_from_1_and_flags_unlike_work():
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), shipped("tiny-cpu-fwd-ctx64.json")])
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        for _ in range(2):
            await pilot.press("m", "down")
        await pilot.press("c")
        await pilot.pause()
        text = "".join(plain(s.content) for s in app.query("#compare-pane Static"))
        assert "against run 1" in text and "unlike work: ctx, mode differ" in text


async def test_a_live_filter_draws_its_rows_at_their_full_width():
    """Typing a filter refills the table from the field's handler: no idle moment of the table's own to
    measure the new rows, so the widths must be set with the rows (they were cut to the header's)."""
    from rich.cells import cell_len
    app = make_app(snapshots=[shipped("tiny-cpu-train-torch-profile.json")])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "enter", "3")
        await pilot.pause()
        table = app.query_one("#kernel-table", SortableTable)
        for text in ("s", "so", "sof", "soft"):
            table.set_filter(lambda r, t=text: t in r["name"].lower())   # as the field's Changed handler does
            assert table.row_count
            for i, col in enumerate(table.ordered_columns):                # before the table has idled
                widest = max(cell_len(str(table.get_row_at(r)[i])) for r in range(table.row_count))
                assert col.get_render_width(table) - 2 * table.cell_padding >= widest, (text, col.label.plain)


def test_the_no_profile_hint_offers_nsys_only_on_a_gpu():
    from perfconsole.core.record import RunRecord
    from perfconsole.core.settings import RunSpec
    from perfconsole.tui.panes.profile_tables import _no_profile

    cpu, gpu = RunRecord(RunSpec(size="tiny", device="cpu")), RunRecord(RunSpec(size="tiny", device="cuda"))
    assert "launch with profiler torch, or import nsys CSVs" in _no_profile(cpu, "cuda_gpu_kern_sum")
    assert "launch with profiler torch or nsys, or import" in _no_profile(gpu, "cuda_gpu_kern_sum")

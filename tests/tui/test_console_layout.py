"""How the panes use the terminal: the Live chart grows with it, and columns keep what tells runs apart."""
from __future__ import annotations

from console_helpers import make_app, shipped

from perfconsole.core import store


async def _show(app, pilot, path) -> None:
    record = store.load(path)
    app.session.add(record)
    app.session.show(record)
    app.show_current()
    await pilot.press("2")
    await pilot.pause()


async def test_the_live_chart_grows_with_the_terminal():
    heights = {}
    for size in ((80, 24), (120, 40)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await _show(app, pilot, shipped("tiny-cpu-train-fp32.json"))
            heights[size] = app.query_one("#chart").size.height
            chart_lines = app.query_one("#chart").render().plain.splitlines()
            assert len(chart_lines) == heights[size]               # it draws in all of them
    assert heights[(80, 24)] >= 9
    assert heights[(120, 40)] >= heights[(80, 24)] + 6


async def test_the_live_chart_spreads_a_few_steps_over_its_width():
    # Ten steps were ten one-column bars at the chart's left, the rest of its 38 to 78 columns empty.
    for size in ((80, 24), (120, 40)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await _show(app, pilot, shipped("tiny-cpu-train-fp32.json"))
            chart = app.query_one("#chart")
            plot = [line[8:] for line in chart.render().plain.splitlines()[:-2]]   # past the axis labels
            room = chart.size.width - 8
            used = max(len(line.rstrip()) for line in plot)
            # as wide as the steps share the room: at most a column per step and the last step's gap left over
            assert len(chart.steps) == 10 and used > room - len(chart.steps) - 1, (size, room, used, plot)
            columns = ["".join(line[x] if x < len(line) else " " for line in plot) for x in range(used)]
            assert sum(c.strip() == "" for c in columns) >= len(chart.steps) - 1   # the steps stand apart


async def test_at_80_columns_runs_and_nvtx_keep_every_column_in_view():
    from console_helpers import fixture_profile_record, screen_lines

    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), shipped("tiny-cpu-sweep.json")])
    async with app.run_test(size=(80, 24)) as pilot:
        record = fixture_profile_record()
        app.session.add(record)
        app.session.show(record)
        app.show_current()
        app.refresh_runs()
        await pilot.press("5")
        await pilot.pause()
        table = app.query_one("#runs-table")
        assert table.virtual_size.width <= table.size.width       # the source column was cut to "s"
        sources = [str(table.get_row_at(i)[-1]) for i in range(table.row_count)]
        full = ["tiny-cpu-train-fp32", "session", "tiny-cpu-sweep"]
        assert all(s == f or (len(s) >= 12 and ".." in s and s.endswith(f[-4:])) for s, f in zip(sources, full)), sources
        await pilot.press("3")
        await pilot.pause()
        kernels = app.query_one("#kernel-table")
        # every column in view, and a cut kernel name takes the room there is (10 columns were left empty)
        assert kernels.size.width - 5 <= kernels.virtual_size.width <= kernels.size.width, (kernels.virtual_size, kernels.size)
        await pilot.press("4")
        await pilot.pause()
        nvtx = app.query_one("#nvtx-table")
        assert nvtx.size.width - 5 <= nvtx.virtual_size.width <= nvtx.size.width, (nvtx.virtual_size, nvtx.size)
        names = [r["range"] for r in nvtx.shown]
        shown = [str(nvtx.get_row_at(i)[-1]) for i in range(nvtx.row_count)]
        long = [(n, s) for n, s in zip(names, shown) if n != s]
        assert long and all(s.endswith(n[-4:]) and ".." in s for n, s in long)   # cut in the middle
        assert any(n[-6:] in line for n, _ in long for line in screen_lines(app))


async def test_compare_heads_show_what_differs_and_like_names_get_a_number(tmp_path):
    from console_helpers import plain

    paths = []
    for name in ("tiny-cpu-train-fp32.json", "tiny-cpu-train-bf16.json"):
        r = store.load(shipped(name))
        r.spec = r.spec.with_(size="small", ctx=1024, batch=16)
        r.name = r.spec.label()                                   # over 24 wide
        paths.append(tmp_path / name)
        store.save(r, paths[-1])
    twin = store.load(paths[0])
    twin.id += "-again"
    paths.append(tmp_path / "twin.json")
    store.save(twin, paths[-1])
    app = make_app(snapshots=paths)
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        fp32, bf16 = (store.load(p).name for p in paths[:2])       # "small ctx1024 b16 fp32 train step-sync"
        assert [r.name for r in app.session.runs] == [fp32, bf16, fp32 + " #2"]
        await pilot.press("5", "m", "down", "m", "c")
        await pilot.pause()
        head = plain(app.query_one("#compare-body").content).split("precision")[0]
        assert "fp32 · small ctx1024" in head and "bf16 · small ctx1024" in head, head   # cut from "... b16 train"


def _named(name: str, precision: str, size: str = "small"):
    r = store.load(shipped(name))
    r.spec = r.spec.with_(size=size, ctx=1024, batch=16, precision=precision)
    r.name, r.id = r.spec.label(), f"{size}-{precision}"           # "small ctx1024 b16 fp32 train step-sync"
    return r


def _list(app, runs) -> None:
    for r in runs:
        app.session.add(r)


def _names_shown(app) -> list[str]:
    table = app.query_one("#runs-table")
    return [str(table.get_row_at(i)[2]) for i in range(table.row_count)]


async def test_at_80_columns_a_run_s_name_starts_with_the_fields_that_differ_among_the_runs():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        _list(app, [_named("tiny-cpu-fwd-ctx64.json", "fp32", size="tiny")])   # unlike the rest in most words
        _list(app, [_named("tiny-cpu-train-fp32.json", p) for p in ("fp32", "bf16", "fp16")])
        app.refresh_runs()
        await pilot.press("5")
        await pilot.pause()
        shown = _names_shown(app)
        assert any(len(s) < len(r.name) for s, r in zip(shown, app.session.runs)), shown   # the names were cut
        # size, precision and mode differ: first, and first of them what tells a run from the runs nearest it
        assert shown == ["tiny fwd fp32 · ctx1024 ...", "fp32 small train · ctx10...", "bf16 small train · ctx10...",
                         "fp16 small train · ctx10..."], shown


async def test_at_80_columns_runs_alike_but_for_mode_and_profiler_lead_with_them_and_keep_their_number():
    # Three fp32 ctx256 runs (one twice) beside a bf16 ctx512 one, from files with long names: the name column
    # is cut to about 16, where all three read "ctx256 fp32 ..." and the "#2" was lost.
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        changes = ({}, {"mode": "train", "profile": "torch"}, {"mode": "train", "profile": "torch"},
                   {"ctx": 512, "precision": "bf16", "mode": "train"})
        for i, change in enumerate(changes):
            r = store.load(shipped("tiny-cpu-train-fp32.json"))
            r.spec = r.spec.with_(**{**dict(size="small", ctx=256, batch=4, mode="fwd_bwd", profile="none"), **change})
            r.id, r.name = f"2026112{i}-194841-41949c", r.spec.label()
            app.session.add(r)   # named "... #2" where it must be
            app.session.saved(r.id, f"/data/snapshots/{r.name.replace(' ', '_')}-{r.id}.json")
        app.refresh_runs()
        await pilot.press("5")
        await pilot.pause()
        shown = _names_shown(app)
        assert all(len(s) < len(r.name) for s, r in zip(shown, app.session.runs)), shown     # every name was cut
        assert shown[0].startswith("fwd_bwd ")
        assert shown[1].startswith("train torch") and shown[2].startswith("train torch"), shown
        assert shown[2].endswith(" #2") and not shown[1].endswith(" #2")
        assert shown[3].startswith("ctx512 bf16"), shown


async def test_runs_fit_a_terminal_resized_while_they_are_shown():
    from console_helpers import screen_lines

    app = make_app()
    async with app.run_test(size=(120, 24)) as pilot:
        _list(app, [_named("tiny-cpu-train-fp32.json", p) for p in ("fp32", "bf16", "fp16")])
        app.refresh_runs()
        await pilot.press("5")
        await pilot.pause()
        full = [r.name for r in app.session.runs]
        assert _names_shown(app) == full
        for size in ((66, 24), (120, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await pilot.pause()
            table = app.query_one("#runs-table")
            assert table.virtual_size.width <= table.size.width, (size, table.virtual_size, table.size)
            shown = _names_shown(app)
            assert (shown == full) == (size[0] == 120), shown
            screen = "\n".join(screen_lines(app))
            for name, p in zip(shown, ("fp32", "bf16", "fp16")):
                assert name in screen, (name, screen)          # drawn at the width it was cut to
                assert name.startswith(p) or size[0] == 120, shown


async def test_a_saved_comparison_s_file_name_keeps_the_fields_that_differ():
    from perfconsole.core.paths import data_dir

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        _list(app, [_named("tiny-cpu-train-fp32.json", p) for p in ("fp32", "bf16")])   # alike for 22 characters
        app.refresh_runs()
        await pilot.press("5", "m", "down", "m", "c")
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        saved = [p.name for p in (data_dir() / "snapshots").glob("compare-*.json")]
        assert len(saved) == 1 and saved[0].startswith("compare-fp32_vs_bf16_small_ctx1024_b16"), saved


async def test_compare_heads_take_the_width_there_is():
    # At 120 columns with two runs the heads were cut to 24 ("fp32 · small ctx1024 b..."), 60 columns left empty;
    # at 80 they are cut to what fits, and the tables stay inside the pane.
    from console_helpers import screen_lines

    from perfconsole.core.reports.names import differs_first

    for width in (120, 80):
        app = make_app()
        async with app.run_test(size=(width, 34)) as pilot:
            _list(app, [_named("tiny-cpu-train-fp32.json", p) for p in ("fp32", "bf16")])
            app.refresh_runs()
            await pilot.press("5", "m", "down", "m", "c")
            await pilot.pause()
            heads = differs_first(app.session.runs)           # "fp32 · small ctx1024 b16 train ...", 37 or more wide
            lines = screen_lines(app)
            whole = all(any(h in line for line in lines) for h in heads)
            assert whole == (width == 120), (width, heads, lines[:8])
            assert all(len(line.rstrip()) <= width for line in lines)
            body = app.query_one("#compare-body")
            assert body.virtual_region.width <= app.query_one("#compare-pane").size.width

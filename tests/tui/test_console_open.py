"""Opening snapshots from Runs (`o`) by typing a path, and moving in the console's tables with the keys."""
from __future__ import annotations

from console_helpers import make_app, shipped
from textual.widgets import DataTable, Input

from perfconsole.tui.actions import snapshot_choices
from perfconsole.tui.screens.dialogs import OpenScreen


async def test_a_typed_path_opens_that_file_and_the_keys_work_afterwards():
    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json"), shipped("tiny-cpu-train-torch-profile.json")])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "o")
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen)
        assert isinstance(app.focused, Input) and app.focused.id == "open-path"   # typing goes to the path
        wanted = shipped("tiny-cpu-train-bf16.json")                               # not the list's first entry
        await pilot.press(*str(wanted), "enter")
        await pilot.pause()
        assert not isinstance(app.screen, OpenScreen)
        assert [app.session.file_of(r.id) for r in app.session.runs][-1] == str(wanted) and len(app.session.runs) == 3
        table = app.query_one("#runs-table", DataTable)
        assert app.focused is table
        await pilot.press("end")                               # the last row, not the last column
        assert table.cursor_row == 2 and table.scroll_x == 0
        await pilot.press("home", "space")
        await pilot.pause()
        assert table.cursor_row == 0 and app.session.marked == [app.session.runs[0].id]


async def test_down_or_tab_from_the_path_reaches_the_list_and_an_empty_enter_opens_nothing():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "o", "enter")                   # nothing typed: nothing opened, the list has focus
        await pilot.pause()
        assert isinstance(app.screen, OpenScreen) and app.session.runs == [] and app.focused.id == "open-list"
        await pilot.press("shift+tab", "down", "down", "enter")  # back to the path; down: the list; down: 2nd entry
        await pilot.pause()
        assert list(app.session.files.values()) == [str(snapshot_choices()[1])]
        await pilot.press("5", "o", *"typed", "escape")        # Esc in the path field cancels the dialog
        await pilot.pause()
        assert not isinstance(app.screen, OpenScreen) and len(app.session.files) == 1


async def test_a_new_session_lists_what_earlier_ones_saved_newest_first():
    import os
    import shutil

    from console_helpers import plain, wait_for

    from perfconsole.core.paths import data_dir

    folder = data_dir() / "snapshots"
    folder.mkdir(parents=True)
    for age, name in enumerate(("tiny-cpu-train-bf16.json", "tiny-cpu-sweep.json", "tiny-cpu-train-fp32.json")):
        copy = folder / name
        shutil.copy(shipped(name), copy)
        os.utime(copy, (1_700_000_000 - age * 60, 1_700_000_000 - age * 60))   # bf16 newest, fp32 oldest
    (folder / "broken.json").write_text("{not json")
    app = make_app()
    said: list[str] = []  # every message, kept: a toast leaves the screen after its timeout (5 s) on a loaded machine
    notify = app.notify
    app.notify = lambda message, *args, **kw: (said.append(str(message)), notify(message, *args, **kw))[1]
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: len(app.session.runs) == 2, timeout=30)
        await pilot.press("5")
        await pilot.pause()
        assert [r.spec.precision for r in app.session.runs] == ["bf16", "fp32"]
        assert [app.session.file_of(r.id) for r in app.session.runs] == [str(folder / "tiny-cpu-train-bf16.json"),
                                                          str(folder / "tiny-cpu-train-fp32.json")]
        assert len(app.session.grids) == 1
        assert plain(app.query_one("#runs-title").content).startswith("2 runs, 1 grid")
        assert any("1 file(s)" in m for m in said), said


async def test_a_second_comparison_is_saved_beside_the_first_not_over_it():
    from perfconsole.core import store
    from perfconsole.core.paths import data_dir
    from perfconsole.core.reports.compare import Comparison

    app = make_app(snapshots=[shipped(n) for n in ("tiny-cpu-train-fp32.json", "tiny-cpu-train-bf16.json",
                                                    "tiny-cpu-fwd-ctx64.json")])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        a, b, c = app.session.runs
        for r in (b, c):   # long names alike for more than 70 characters: the cut used to make one file of both
            r.name = "tiny ctx32 b2 train, the same long words in both names, then what differs: " + r.name
        saved = []
        for other in (b, c):
            app.show_comparison(Comparison([other, a]))
            await pilot.press("s")
            await pilot.pause()
            saved = sorted((data_dir() / "snapshots").glob("compare-*.json"))
        assert len(saved) == 2
        assert sorted(tuple(r.id for r in store.load(p).runs) for p in saved) == sorted([(b.id, a.id), (c.id, a.id)])
        await pilot.press("s")                         # the same comparison again: its own file, rewritten
        await pilot.pause()
        assert sorted((data_dir() / "snapshots").glob("compare-*.json")) == saved


async def test_a_path_typed_in_a_burst_after_o_goes_to_the_dialog():
    """Keys sent at once (tmux send-keys, typing over SSH): `o`, a path and Enter. The path's letters used
    to reach the table behind the dialog or nothing, and the Enter submitted an empty path."""
    from textual import events
    from textual.keys import _character_to_key

    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json")])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        wanted = str(shipped("tiny-cpu-train-bf16.json"))
        for ch in "o" + wanted + "\r":                       # queued together, none handled in between
            app.post_message(events.Key("enter" if ch == "\r" else _character_to_key(ch), ch))
        await pilot.pause()
        await pilot.pause(0.3)
        assert not isinstance(app.screen, OpenScreen)
        assert [app.session.file_of(r.id) for r in app.session.runs] == [str(shipped("tiny-cpu-train-fp32.json")), wanted]




async def test_e_then_a_path_in_one_burst_exports_to_that_path(tmp_path):
    """`e`, a path and Enter at once: the path reached the Export dialog before its field had the focus and
    was lost, so the file went to the default path. Now it lands as if typed once the dialog was up (the
    field's default is selected when it takes the focus, so what is typed replaces it)."""
    from textual import events
    from textual.keys import _character_to_key

    app = make_app(snapshots=[shipped("tiny-cpu-train-fp32.json")])
    wanted = tmp_path / "typed.md"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        await pilot.pause()
        for ch in "e" + str(wanted) + "\r":
            app.post_message(events.Key("enter" if ch == "\r" else _character_to_key(ch), ch))
        await pilot.pause()
        await pilot.pause(0.3)
        assert wanted.is_file() and wanted.read_text().startswith("#")


async def test_a_saved_comparison_is_listed_in_runs_now_and_after_a_restart_and_opens_into_compare():
    from console_helpers import plain, screen_lines, wait_for

    from perfconsole.core.paths import data_dir

    app = make_app(snapshots=[shipped(n) for n in ("tiny-cpu-train-fp32.json", "tiny-cpu-train-bf16.json")])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5", "space", "down", "space", "c")
        await pilot.pause()
        await pilot.press("s")                                  # saved from Compare
        await pilot.pause()
        ids = [r.id for r in app.session.runs]
        assert app.query_one("#runs-table", DataTable).row_count == 3     # the two runs, and the comparison
    [saved] = (data_dir() / "snapshots").glob("compare-*.json")

    again = make_app()                                          # the next console, on the same data directory
    async with again.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: again.query_one("#runs-table", DataTable).row_count == 1, timeout=20)
        await pilot.press("5")
        await pilot.pause()
        assert plain(again.query_one("#runs-title").content).startswith("0 runs, 1 comparison (Enter shows one)")
        assert any("compare fp32 vs bf" in line and "2 runs" in line for line in screen_lines(again)), \
            screen_lines(again)
        await pilot.press("space")                              # a comparison is shown, not marked
        await pilot.press("enter")
        await pilot.pause()
        assert again.query_one("#tabs").active == "compare"
        assert [r.id for r in again.session.compared.runs] == ids and again.session.runs == []   # its runs are not listed twice
        await pilot.press("5", "d", "y")
        await pilot.pause()
        assert not again.session.comparisons and not saved.exists()     # off the list, and its file in the data directory
        assert again.session.compared is None

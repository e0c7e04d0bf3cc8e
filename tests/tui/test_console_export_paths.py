"""The console's Export dialog follows the CLI's rule for output paths (core.store.writable_file): a missing
folder is an error naming it, in the CLI's words, and nothing is created; the dialog stays open with the
path as typed, to be corrected."""
from __future__ import annotations

from textual.widgets import Input

from perfconsole.core.cli import main as cli
from perfconsole.core.paths import data_dir
from perfconsole.tui.screens.dialogs import ExportScreen

from console_helpers import make_app, shipped, wait_for

RUN = shipped("tiny-cpu-train-fp32.json")


async def _export_dialog(pilot) -> None:  # noqa: ANN001
    """Runs (5), then export (e) on the run under the cursor: the dialog is up."""
    await pilot.press("5")
    await pilot.pause()
    await pilot.press("e")
    await pilot.pause()


async def test_export_to_a_missing_folder_is_the_clis_error_and_creates_nothing(tmp_path, capsys):
    assert cli.main(["export", str(RUN), "-o", str(tmp_path / "nonexistent2" / "dir" / "x.md")]) == 2
    cli_error = capsys.readouterr().err.strip().removeprefix("perfconsole: error: ")
    missing = tmp_path / "nonexistent" / "dir"
    app = make_app(snapshots=[RUN])
    async with app.run_test(size=(120, 34)) as pilot:
        await _export_dialog(pilot)
        field = app.screen.query_one("#export-path", Input)
        field.value = str(missing / "x.md")
        await pilot.press("enter")
        await pilot.pause()
        said = [str(n.message) for n in app._notifications]
        assert cli_error == f"{tmp_path / 'nonexistent2' / 'dir'}: no such directory"
        assert any(f"{missing}: no such directory" in m for m in said), said
        assert not any(m.startswith("exported") for m in said), said
        assert isinstance(app.screen, ExportScreen) and field.value == str(missing / "x.md")
        assert not (tmp_path / "nonexistent").exists()
        # Corrected in place, it exports.
        field.value = str(tmp_path / "x.md")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ExportScreen)
        assert (tmp_path / "x.md").read_text().startswith("# tiny ctx32")


async def test_the_default_export_folder_in_the_data_directory_is_made_on_first_use():
    """perfconsole's own folder is not the user's typo: the dialog's default path works in a fresh data dir."""
    app = make_app(snapshots=[RUN])
    assert not (data_dir() / "exports").exists()
    async with app.run_test(size=(120, 34)) as pilot:
        await _export_dialog(pilot)
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, ExportScreen)
        assert len(list((data_dir() / "exports").glob("*.md"))) == 1


async def test_f4_writes_a_profiled_runs_timeline_as_svg_and_an_unprofiled_run_says_why(tmp_path):
    """F4 is `perfconsole export --format svg`: the run's timeline, its trace found as the CLI finds it."""
    import xml.etree.ElementTree as ET

    from perfconsole.core import store

    from test_timeline_pane import trace_record

    profiled = tmp_path / "profiled.json"
    store.save(trace_record(), profiled)
    for snapshot, out in ((profiled, tmp_path / "timeline.svg"), (RUN, tmp_path / "none.svg")):
        app = make_app(snapshots=[snapshot])
        async with app.run_test(size=(120, 34)) as pilot:
            await _export_dialog(pilot)
            await pilot.press("f4")
            field = app.screen.query_one("#export-path", Input)
            assert field.value.endswith(".svg")
            field.value = str(out)
            await pilot.press("enter")
            # The SVG is drawn off the UI thread: done when the console says so.
            await wait_for(pilot, lambda app=app: any(str(n.message).startswith(("exported", "export failed"))
                                              for n in app._notifications), timeout=60)
            said = [str(n.message) for n in app._notifications]
        if snapshot == profiled:
            assert said[-1] == f"exported {out}", said
            text = "".join(ET.fromstring(out.read_text()).itertext())
            assert "gpu0" in text and "s7" in text
        else:
            assert not out.exists()
            assert any(m.startswith("export failed: ") and "no profile" in m for m in said), said

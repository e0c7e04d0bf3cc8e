"""The console's session (tui/session.py) on its own, with no app and no Textual: runs added, named, marked,
shown and removed; grids and comparisons listed; and the one place that says a run has a file."""
from __future__ import annotations

import subprocess
import sys

from perfconsole.core import store
from perfconsole.core.paths import data_dir
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.tui.session import Session
from helpers import ROOT

SHIPPED = ROOT / "snapshots"
SPEC = RunSpec(size="tiny", ctx=32, batch=2, device="cpu")


def _holders(session: Session, item_id: str) -> list[str]:
    """The session's fields that name `item_id` (a key of a mapping, or an element of a list or set)."""
    return sorted(k for k, v in vars(session).items() if isinstance(v, (dict, set, list)) and item_id in v)


def test_the_session_imports_no_textual():
    code = "import sys, perfconsole.tui.session; print(any(m.split('.')[0] == 'textual' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_add_names_each_run_apart_and_lists_an_id_once():
    s = Session()
    a, b, c = RunRecord(SPEC), RunRecord(SPEC), RunRecord(SPEC)
    assert s.add(a) and s.add(b) and s.add(c)
    assert [r.name for r in s.runs] == [a.name, f"{a.name} #2", f"{a.name} #3"]
    again = RunRecord(SPEC, id=a.id)
    assert not s.add(again, "/elsewhere.json")              # one row per id, and the file it came with is not its
    assert list(s.runs) == [a, b, c] and s.file_of(a.id) is None
    assert s.run(b.id) is b and s.run("no-such-id") is None


def test_a_run_opened_from_a_file_says_so_in_one_place_and_keeps_that_file():
    s = Session()
    opened = store.load(SHIPPED / "tiny-cpu-train-fp32.json")
    s.add(opened, str(SHIPPED / "tiny-cpu-train-fp32.json"))
    assert s.file_of(opened.id) == str(SHIPPED / "tiny-cpu-train-fp32.json")
    assert _holders(s, opened.id) == ["_files"]             # the one place: no second set of "kept" ids
    assert not s.saved(opened.id, "/data/copy.json")        # saved again: it keeps the file it was opened from
    assert s.file_of(opened.id) == str(SHIPPED / "tiny-cpu-train-fp32.json")
    assert s.own_file(opened.id) == ""                      # a shipped file is not the data directory's to delete


def test_a_run_saved_by_hand_has_its_first_file_and_it_is_the_data_directorys():
    s = Session()
    r = RunRecord(SPEC)
    s.add(r)
    assert s.file_of(r.id) is None and _holders(s, r.id) == []
    path = str(data_dir() / "snapshots" / f"{r.id}.json")
    assert s.saved(r.id, path)
    assert not s.saved(r.id, "/somewhere/else.json")
    assert s.file_of(r.id) == path and s.own_file(r.id) == path and _holders(s, r.id) == ["_files"]
    s.forget_file(r.id)
    assert s.file_of(r.id) is None


def test_marks_keep_their_order_and_name_only_listed_runs():
    s = Session()
    a, b = RunRecord(SPEC), RunRecord(SPEC)
    s.add(a)
    s.add(b)
    assert s.toggle_mark(b.id) and s.toggle_mark(a.id)
    assert list(s.marked) == [b.id, a.id] and s.marked_runs() == [b, a]
    assert not s.toggle_mark(b.id)
    assert list(s.marked) == [a.id]


def test_remove_takes_the_run_its_mark_its_file_and_the_shown_run():
    s = Session()
    a, b = RunRecord(SPEC), RunRecord(SPEC)
    s.add(a, "/data/a.json")
    s.add(b)
    s.toggle_mark(a.id)
    s.toggle_mark(b.id)
    s.show(a)
    s.remove(a)
    assert list(s.runs) == [b] and list(s.marked) == [b.id] and s.current is None and s.file_of(a.id) is None
    assert _holders(s, a.id) == []
    s.show(b)
    assert s.current is b


def test_grids_and_comparisons_are_listed_once_with_their_files():
    from perfconsole.core.reports.compare import Comparison

    s = Session()
    sweep = store.load(SHIPPED / "tiny-cpu-sweep.json")
    assert s.add_grid(sweep, "/data/sweep.json") is sweep
    twin = store.load(SHIPPED / "tiny-cpu-sweep.json")
    assert s.add_grid(twin, "/other.json") is sweep           # the one listed stays, with its file
    assert list(s.grids) == [sweep] and s.file_of(sweep.id) == "/data/sweep.json" and s.grid(sweep.id) is sweep
    s.show_grid(sweep)
    assert s.shown_grid is sweep
    s.remove_grid(sweep)
    assert list(s.grids) == [] and s.file_of(sweep.id) is None

    c = Comparison([RunRecord(SPEC), RunRecord(SPEC)])
    s.list_comparison("cmp-1", c, "/data/cmp.json")
    s.list_comparison("cmp-1", c, "/data/cmp-again.json")    # saved again: one row, its new file
    assert dict(s.comparisons) == {"cmp-1": c} and s.file_of("cmp-1") == "/data/cmp-again.json"
    assert s.comparison("cmp-1") is c and s.comparison(None) is None
    s.compare(c)
    assert s.compared is c
    s.remove_comparison("cmp-1")
    assert dict(s.comparisons) == {} and s.file_of("cmp-1") is None


def test_leaving_saves_each_measured_run_once_and_the_session_names_its_file():
    """The exit save (tui/exit_guard.py) asks the session which runs have a file and tells it the ones it wrote:
    a run opened from a file, or one saved on the way out already, is not written again."""
    from perfconsole.tui.exit_guard import save_measured

    s = Session()
    opened = store.load(SHIPPED / "tiny-cpu-train-fp32.json")
    s.add(opened, str(SHIPPED / "tiny-cpu-train-fp32.json"))
    measured = store.load(SHIPPED / "tiny-cpu-train-fp32.json")
    measured.id = "20260101-000000-abcdef"
    s.add(measured)
    s.add(RunRecord(SPEC))                                    # no steps: nothing to keep
    saved = save_measured(s)
    assert len(saved) == 1 and saved[0].is_file() and s.file_of(measured.id) == str(saved[0])
    assert store.load(saved[0]).id == measured.id
    assert save_measured(s) == []                             # once

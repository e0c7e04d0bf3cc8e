"""Run names with what differs first: the Runs list, Compare's heads and a comparison's file name."""
from __future__ import annotations

from perfconsole.core.paths import safe_name
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.names import cut, differs_first, short_title
from perfconsole.core.settings import RunSpec

BASE = RunSpec(size="tiny", device="cpu")          # "tiny ctx256 b4 fp32 fwd_bwd"


def _runs(*changes: dict) -> list[RunRecord]:
    return [RunRecord(BASE.with_(**c)) for c in changes]


def test_the_fields_that_differ_among_the_listed_runs_come_first():
    # A run, then ctrl+t with the torch profiler: the first differs from the others in the profiler alone,
    # the others from each other in the precision alone; each row must keep its precision.
    runs = _runs({}, {"profile": "torch"}, {"profile": "torch", "precision": "bf16"},
                 {"profile": "torch", "precision": "fp16"})
    assert [r.name for r in runs][1] == "tiny ctx256 b4 fp32 fwd_bwd torch"
    assert differs_first(runs) == ["fp32 · tiny ctx256 b4 fwd_bwd",
                                   "fp32 torch · tiny ctx256 b4 fwd_bwd",
                                   "bf16 torch · tiny ctx256 b4 fwd_bwd",
                                   "fp16 torch · tiny ctx256 b4 fwd_bwd"]


def test_a_name_that_is_not_the_spec_s_words_stays_as_it_is():
    runs = _runs({}, {"precision": "bf16", "compile": True})
    imported = RunRecord(BASE.with_(size="small"), name="nsys fixture tables")
    # bf16 and compile tell the second run from the first, its nearest; tiny only from the imported one
    assert differs_first([*runs, imported]) == ["tiny fp32 · ctx256 b4 fwd_bwd", "bf16 compile tiny · ctx256 b4 fwd_bwd",
                                                "nsys fixture tables"]
    assert differs_first(runs[:1]) == ["tiny ctx256 b4 fp32 fwd_bwd"] and differs_first([]) == []


def test_runs_of_one_name_are_told_apart_by_the_fields_the_name_does_not_show():
    runs = _runs({"steps": 5}, {"steps": 9}, {"precision": "bf16"})
    runs[1].name += " #2"
    assert differs_first(runs) == ["fp32 steps=5 · tiny ctx256 b4 fwd_bwd", "fp32 steps=9 #2 · tiny ctx256 b4 fwd_bwd",
                                   "bf16 · tiny ctx256 b4 fwd_bwd"]


def test_a_comparison_s_file_name_keeps_the_fields_that_differ():
    runs = _runs({"profile": "torch"}, {"profile": "torch", "precision": "bf16"})
    title = short_title(runs)
    assert title == "fp32 vs bf16 · tiny ctx256 b4 fwd_bwd torch"
    assert safe_name("compare-" + title, 60).startswith("compare-fp32_vs_bf16_tiny")
    three = _runs({}, {"precision": "bf16"}, {"size": "small", "precision": "fp16"})
    assert short_title(three) == "fp32 tiny vs bf16 tiny vs small fp16 · ctx256 b4 fwd_bwd"


def test_the_words_that_tell_a_run_from_most_of_the_others_lead_it():
    # Three fp32 ctx256 runs that differ in mode and profiler, beside a bf16 ctx512 run: ctx256 and fp32 differ
    # among the four, but tell none of the three apart; their mode and profiler, which tell each from the runs
    # nearest it, come first.
    runs = _runs({}, {"mode": "train", "profile": "torch"}, {"mode": "train", "profile": "torch"},
                 {"ctx": 512, "precision": "bf16", "mode": "train"})
    runs[2].name += " #2"
    assert differs_first(runs) == ["fwd_bwd ctx256 fp32 · tiny b4",
                                   "train torch ctx256 fp32 · tiny b4",
                                   "train torch ctx256 fp32 #2 · tiny b4",
                                   "ctx512 bf16 train · tiny b4"]


def test_a_cut_name_keeps_its_number_whole():
    assert cut("torch ctx256 fp32 train #2 · tiny b4", 16) == "torch ctx2... #2"
    assert cut("torch ctx256 fp32 train · tiny b4", 16) == "torch ctx256 ..."
    assert cut("fwd_bwd #12 · tiny ctx256", 12) == "fwd_b... #12"
    assert cut("short #2", 16) == "short #2"
    head = "torch ctx256 fp32 train #12 · tiny b4"
    for width in range(4, len(head)):
        got = cut(head, width)
        assert len(got) <= width and got.endswith(" #12"), (width, got)
    assert cut(head, len(head)) == head

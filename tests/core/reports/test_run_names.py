"""Run names with what differs first: the Runs list, Compare's heads and a comparison's file name."""
from __future__ import annotations

from perfconsole.core.paths import safe_name
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.names import differs_first, short_title
from perfconsole.core.spec import RunSpec

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
    assert differs_first([*runs, imported]) == ["tiny fp32 · ctx256 b4 fwd_bwd", "tiny bf16 compile · ctx256 b4 fwd_bwd",
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
    assert short_title(three) == "tiny fp32 vs tiny bf16 vs small fp16 · ctx256 b4 fwd_bwd"

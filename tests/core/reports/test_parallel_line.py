"""A data-parallel record's one line: the exposed communication where the step waited for it, and no figure where
the step without the all-reduce was the slower one (a host-paced job: the difference is the steps' own spread).
The record is a real two-GPU DDP job of `small` on H100s (docs/results/timeline_h100.md), whose step without the
all-reduce took 59.16 ms against a 55.92 ms step."""
from __future__ import annotations

from dataclasses import replace

from helpers import FIXTURES

from perfconsole.core import store
from perfconsole.core.reports.parallel import job_line

RECORD = FIXTURES / "records" / "h100_small_ddp2_torch.json"


def test_a_step_faster_than_its_step_without_the_all_reduce_shows_no_exposed_figure():
    r = store.load(RECORD)
    assert round(r.summary.exposed_comm_ms, 2) == -3.24 and round(r.summary.comm_free_ms, 2) == 59.16
    line = job_line(r)
    assert "exposed: none measurable (the step without all-reduce, 59.16 ms, was 3.24 ms slower than the step)" in line
    assert "hidden" not in line and "x the collectives alone" not in line and "-3.24" not in line


def test_a_step_that_waited_for_its_all_reduce_shows_what_it_waited_for():
    r = store.load(RECORD)
    waited = replace(r, summary=replace(r.summary, exposed_comm_ms=1.5, comm_free_ms=54.42, comm_hidden_share=0.9))
    line = job_line(waited)
    assert "exposed 1.50 ms (step without all-reduce 54.42 ms; 90.0% hidden)" in line
    own = r.collectives["alone_ms"]
    assert f"exposed {1.5 / own:.2f}x the collectives alone" in line


def test_the_ladders_and_scales_tables_and_bars_say_none_where_the_line_does():
    """The same rule in the tables' cells and the bars' words: a negative difference is no exposed figure, shown as
    'none' with the difference beside it; a positive one is the figure."""
    from perfconsole.core.reports.scaling_bars import ScalingBar, exposed_cell, lines

    assert exposed_cell(None) == "-" and exposed_cell(-7.113) == "none (-7.11)" and exposed_cell(9.491) == "9.49"
    faster = ScalingBar("6 compile", 299.44, 293.77, 300.88, -7.11, 1.019, 2)
    waited = ScalingBar("1 ddp", 303.53, 318.98, 309.49, 9.49, 0.952, 2)
    text = "\n".join(lines([waited, faster]))
    assert "exposed: none measurable (the step without all-reduce 7.1 ms slower)" in text
    assert "exposed 9.5 ms" in text and "exposed -7.1" not in text

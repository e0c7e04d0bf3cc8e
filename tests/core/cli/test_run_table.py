"""`perfconsole run`'s table: the interval of the median stands beside the median, and too few say so."""
from __future__ import annotations

from perfconsole.core import events as ev
from perfconsole.core.cli.run import summary_table
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.run import markdown, run_document
from perfconsole.core.settings import RunSpec
from perfconsole.core.run_summary import compute_summary


def _record(*processes: list[float]) -> RunRecord:
    spec = RunSpec(size="tiny", device="cpu", steps=len(processes[0]), repeat=len(processes))
    r = RunRecord(spec)
    for i, times in enumerate(processes):
        if len(processes) > 1:
            r.apply(ev.Replicate(i, len(processes)))
        steps = [ev.Step(k, False, t, t / 2, t / 2, None) for k, t in enumerate(times)]
        for step in steps:
            r.apply(step)
        if len(processes) > 1:
            r.apply(ev.SummaryReady(compute_summary(spec, steps, [], None).to_dict()))
    r.apply(ev.Finished("ok"))
    return r


def _rows(r: RunRecord) -> dict[str, dict[str, str]]:
    header, *rows = [line.split("\t") for line in summary_table(r).plain().splitlines()
                     if line and not line.startswith("#")]
    return {row[0]: dict(zip(header, row)) for row in rows}


def test_three_steps_are_too_few_and_the_caption_says_what_bounds_them():
    # The table printed "95% CI [2.848, 28,422.306]" after the max, 1,059.510 ms, for these three steps.
    r = _record([96.7, 573.7, 1059.5])
    total = _rows(r)["total"]
    assert list(total)[3:5] == ["median (ms)", "median 95% CI (ms)"]
    assert total["median 95% CI (ms)"] == "too few steps" and total["max (ms)"] == "1059.500"
    caption = summary_table(r).caption
    assert "3 measured steps: too few for the median's 95% interval (6 needed, --steps 6 or more)" in caption
    assert "covers this one process" not in caption
    md = markdown(r)
    assert "| total | 576.633 | 481.407 | 573.700 | too few steps | 96.700 | 1,059.500 |" in md
    assert "3 measured steps: too few for an interval of the median (6 needed)" in md
    doc = run_document(r)["summary"]["total_ms"]
    assert (doc["ci95_low"], doc["ci95_high"], doc["ci95_of"]) == (None, None, "median")


def test_six_steps_have_the_median_s_interval_and_it_covers_one_process():
    r = _record([10.0, 11.0, 12.0, 13.0, 30.0, 9.0])
    total = _rows(r)["total"]
    assert total["median (ms)"] == "11.500" and total["median 95% CI (ms)"] == "[9.000, 30.000]"
    assert "the median's 95% interval covers this one process" in summary_table(r).caption
    assert "| total | 14.167 | 7.885 | 11.500 | [9.000, 30.000] | 9.000 | 30.000 |" in markdown(r)


def test_three_processes_are_too_few_and_their_range_is_printed_as_one():
    r = _record([10.0, 10.5, 11.0], [12.0, 12.5, 13.0], [9.0, 9.5, 10.0])
    caption = " ".join(summary_table(r).caption.split())
    assert ("step between 3 processes (statistics of their medians): median 10.500 ms, too few processes for its "
            "95% interval (6 needed), range [9.500, 12.500] ms") in caption
    md = markdown(r)
    assert "| total | 10.500 | too few processes | 10.833 |" in md
    assert "An interval of the median needs 6 processes or more; min and max bound these." in md

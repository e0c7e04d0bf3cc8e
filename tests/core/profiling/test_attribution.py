"""Per-phase attribution on a real capture: perfconsole's own compiled 2.7B train step under nsys on an H200."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.profiling.attribution import attribute
from perfconsole.core.reports.export import export
from perfconsole.core.reports.profile import attribution, attribution_lines, headline

RUN = Path(__file__).resolve().parents[2] / "fixtures" / "nsys_perfconsole" / "h200_2.7B_compiled_nsys_run.json"


@pytest.fixture(scope="module")
def record():
    return store.load(RUN)


def test_every_kernel_of_the_capture_is_in_a_phase(record):
    a = attribution(record.profile, record.summary, len(record.steps))
    assert a.steps == 8 and [p.phase for p in a.phases] == ["forward", "backward", "optimizer"]
    assert a.unattributed_share < 0.001
    by = {p.phase: p for p in a.phases}
    assert by["backward"].per_step_ms == pytest.approx(51.677, abs=0.01)   # 0.01 ms before the fix
    for phase in ("backward", "optimizer"):
        assert abs(by[phase].rel_diff) < 0.05
    assert -0.10 < by["forward"].rel_diff < 0                              # the idle GPU at a step's start
    assert sum(p.kernel_ms for p in a.phases) + a.unattributed_ms == pytest.approx(a.total_kernel_ms)


def test_without_the_backward_range_the_share_in_no_phase_says_so(record):
    tables = dict(record.profile.tables)
    tables["nvtx_kern_sum"] = [r for r in tables["nvtx_kern_sum"] if r["range"] != "backward"]
    a = attribute(tables, 8)
    assert 0.4 < a.unattributed_share < 0.6 and "backward" not in [p.phase for p in a.phases]


def test_no_kernel_table_or_no_ranges_gives_none():
    assert attribute({}, 8) is None
    assert attribute({"cuda_gpu_kern_sum": [{"name": "k", "total_time_ns": 5}]}, 8) is None


def test_the_report_and_the_console_line_carry_attribution_and_overhead(record):
    md = export(record, "md")
    assert "| in no phase |" in md and "Profiling cost:" in md and "1.008x" in md
    line = headline(record.profile, record.summary, len(record.steps))
    assert "(0.0% in no phase)" in line and "a profiled step took 1.01x the quiet step" in line


def test_a_forward_short_of_kernels_is_host_paced_only_where_the_host_took_as_long(record):
    """The kernels of a real capture against a forward timed 12 % longer: with the host issuing it for as
    long the gap is the GPU waiting between kernels, said in the report; a host done early leaves it unexplained."""
    a = attribution(record.profile, record.summary, len(record.steps))
    by = {p.phase: p for p in a.phases}
    kernels = by["forward"].per_step_ms
    timed = {"forward": kernels * 1.12, "backward": by["backward"].timed_ms, "optimizer": by["optimizer"].timed_ms}
    paced = attribute(record.profile.tables, 8, timed, {"forward": kernels * 1.12 * 0.99})
    early = attribute(record.profile.tables, 8, timed, {"forward": kernels * 0.5})
    unknown = attribute(record.profile.tables, 8, timed)
    assert [p.phase for p in paced.phases if p.host_paced] == ["forward"]
    assert not any(p.host_paced for p in early.phases + unknown.phases)
    assert paced.to_dict()["phases"]["forward"]["host_paced"] is True
    assert paced.phases[0].pacing == "whole"
    # In part: the host issued for 92 % of the kernels' time; the GPU's 12 % wait fits inside that issue (a
    # 2.7B eager forward on an H200 was so). A wait longer than the host's whole issue cannot be the host's.
    part = attribute(record.profile.tables, 8, timed, {"forward": kernels * 0.92})
    assert part.phases[0].pacing == "in part" and part.to_dict()["phases"]["forward"]["host_pacing"] == "in part"
    assert "The forward was paced by the host in part" in "\n".join(attribution_lines(part))
    longer = attribute(record.profile.tables, 8, {**timed, "forward": kernels * 2.0}, {"forward": kernels * 0.92})
    assert longer.phases[0].pacing is None and early.phases[0].pacing is None
    lines = "\n".join(attribution_lines(paced))
    assert "The forward was paced by the host" in lines and "The forward was" not in "\n".join(attribution_lines(early))
    summary = replace(record.summary, forward_ms=replace(record.summary.forward_ms, median=kernels * 1.12),
                      host_forward_ms=kernels * 1.12)
    assert "forward host-paced (issued in" in headline(record.profile, summary, len(record.steps))
    # The backward's issue is recorded too (autograd's thread queues it): a backward the host took as long to
    # issue is host-paced in the same way, and only with its host time known.
    slow_bwd = by["backward"].per_step_ms * 1.12
    summary = replace(record.summary, backward_ms=replace(record.summary.backward_ms, median=slow_bwd))
    assert "backward host-paced" not in (headline(record.profile, summary, len(record.steps)) or "")
    summary = replace(summary, host_backward_ms=slow_bwd)
    assert "backward host-paced (issued in" in headline(record.profile, summary, len(record.steps))

"""Comparison of runs: spec differences, speedup and its interval, kernel moves, snapshots, exports."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.reports import export
from perfconsole.core.reports.compare import Comparison, CompareError, speedup_text
from perfconsole.core.launch.queue import RunQueue, precision_ladder
from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.core.run_summary import compute_summary

SNAPSHOTS = Path(__file__).resolve().parents[3] / "snapshots"


def _run(times: list[float], **spec) -> RunRecord:
    r = RunRecord(RunSpec(size="tiny", device="cpu", **spec))
    for i, t in enumerate(times):
        r.apply(ev.Step(i, False, t, t / 2, t / 4, t / 4))
    r.apply(ev.Finished("ok"))
    return r


def _kernels(r: RunRecord, rows: dict[str, int]) -> RunRecord:
    r.profile = Profile("import", [], {"cuda_gpu_kern_sum": [
        {"name": n, "total_time_ns": t, "instances": 1} for n, t in rows.items()]})
    return r


def test_needs_two_runs():
    with pytest.raises(CompareError):
        Comparison([_run([1.0, 1.1])])


def test_spec_differences_name_only_the_fields_that_differ():
    c = Comparison([_run([1, 1.1], precision="fp32"), _run([1, 1.1], precision="bf16", ctx=512)])
    assert c.spec_differences() == {"ctx": [256, 512], "precision": ["fp32", "bf16"]}


def test_clear_speedup_and_no_significant_difference():
    base = _run([10.0, 10.2, 9.8, 10.1, 9.9])
    fast = _run([5.0, 5.1, 4.9, 5.05, 4.95])
    same = _run([10.1, 9.7, 10.3, 9.9, 10.0])
    c = Comparison([base, fast, same])
    sp = c.speedups()
    assert sp[0] is None
    assert sp[1].significant and sp[1].ratio == pytest.approx(2.0, rel=0.02)
    assert speedup_text(sp[1]).startswith("2.00x faster (95% CI")
    assert not sp[2].significant
    assert speedup_text(sp[2]).startswith("no significant difference")


def test_kernel_moves_rank_by_the_largest_change_against_the_baseline():
    a = _kernels(_run([1, 1.1]), {"ampere_sgemm_128x64_nn": 1000, "softmax_warp_forward": 500, "x": 10})
    b = _kernels(_run([1, 1.1]), {"ampere_sgemm_128x64_nn": 400, "softmax_warp_forward": 520, "new_k": 300})
    moves = Comparison([a, b]).kernel_moves()
    assert [(m.name, m.delta_ns) for m in moves] == [("ampere_sgemm_128x64_nn", -600), ("new_k", 300),
                                                     ("softmax_warp_forward", 20), ("x", -10)]
    assert moves[0].category == "matmul" and moves[1].times_ns == [0, 300]


def test_without_profiles_there_are_no_shares_or_moves():
    c = Comparison([_run([1, 1.1]), _run([2, 2.1])])
    assert c.category_shares() == [None, None] and c.kernel_moves() == []


def test_snapshot_round_trip_and_every_export(tmp_path):
    runs = [store.load(SNAPSHOTS / n) for n in ("tiny-cpu-train-fp32.json", "tiny-cpu-train-torch-profile.json")]
    c = Comparison(runs)
    path = store.save(c, tmp_path / "cmp.json")
    back = store.load(path)
    assert isinstance(back, Comparison) and back.to_dict() == c.to_dict()
    md = export.export(back, "md")
    assert "| profile | none | torch |" in md and "Kernel time by category" in md
    rows = list(csv.DictReader(io.StringIO(export.export(back, "csv"))))
    assert {"spec", "phase", "speedup", "throughput", "category_share"} <= {r["section"] for r in rows}
    doc = json.loads(export.export(back, "json"))
    assert doc["baseline"] == runs[0].id and doc["category_shares"][0] is None
    assert abs(sum(doc["category_shares"][1].values()) - 1) < 1e-9


def test_queue_is_first_in_first_out_and_the_ladder_is_fp32_bf16_fp16():
    spec = RunSpec(size="tiny", device="cpu")
    q = RunQueue(precision_ladder(spec))
    assert [q.pop()[0].precision for _ in range(3)] == ["fp32", "bf16", "fp16"] and q.pop() is None
    with pytest.raises(SpecError):
        q.add(spec.with_(ctx=0))
    assert len(q) == 0
    q.add_interleaved(precision_ladder(spec.with_(repeat=2)))
    q.add(spec)
    assert len(q) == 2 and [s.precision for s in q.pending()] == ["fp32", "bf16", "fp16", "fp32"]
    assert [s.precision for s in q.pop()] == ["fp32", "bf16", "fp16"] and len(q.pop()) == 1
    with pytest.raises(SpecError):
        q.add_interleaved([spec, spec.with_(ctx=0)])
    assert q.clear() == 0


def test_unlike_work_is_flagged_and_like_work_is_not():
    a = store.load(SNAPSHOTS / "tiny-cpu-train-fp32.json")
    b = RunRecord.from_dict(a.to_dict())
    b.id = "other"
    b.spec = b.spec.with_(mode="fwd_bwd", ctx=256)
    c = Comparison([a, b])
    assert c.unlike_work() == ["ctx", "mode"]
    md = export.export(c, "md")
    assert "**Warning: unlike work: ctx, mode differ" in md and "Baseline: run 1 (" in md and "| 1: " in md
    assert json.loads(export.export(c, "json"))["unlike_work"] == ["ctx", "mode"]
    b.spec = a.spec.with_(precision="bf16", compile=True)
    assert Comparison([a, b]).work_note() is None


def test_runs_that_differ_only_in_profiler_have_different_names():
    from perfconsole.core.settings import RunSpec

    base = RunSpec(size="tiny", device="cpu")
    assert len({base.label(), base.with_(profile="torch").label(), base.with_(profile="nsys").label()}) == 3


def test_a_job_s_weak_scaling_efficiency_is_compared_with_its_interval_between_ranks():
    job = store.load(Path(__file__).resolve().parents[2] / "fixtures" / "parallel" / "ddp2_tiny_cpu.json")
    one = RunRecord.from_dict({**job.to_dict(), "id": "one", "name": "one"})
    one.summary = job.summary.__class__.from_dict({**job.summary.to_dict(), "scaling_efficiency": None,
                                                   "scaling_efficiency_ci95": None})   # one process: neither
    job.summary = job.summary.__class__.from_dict({**job.summary.to_dict(), "scaling_efficiency_ci95": [0.5, 0.6]})
    c = Comparison([one, job])
    eff = f"{job.summary.scaling_efficiency:.1%}"
    assert c.scaling() == ["-", f"{eff} [50.0%, 60.0%]"]
    from perfconsole.core.reports.compare import document, markdown
    assert f"| weak-scaling efficiency | - | {eff} [50.0%, 60.0%] |" in markdown(c)
    assert document(c)["scaling_efficiency_ci95"] == [None, [0.5, 0.6]]


def test_a_job_s_communication_is_compared_beside_a_one_process_run():
    from perfconsole.core.reports.compare import csv_text, document, markdown

    job = store.load(Path(__file__).resolve().parents[2] / "fixtures" / "parallel" / "ddp2_tiny_cpu.json")
    one = RunRecord.from_dict({**job.to_dict(), "id": "one", "name": "one", "collectives": None})
    one.spec = one.spec.with_(nproc=1, parallel="none")
    one.summary = job.summary.__class__.from_dict({**job.summary.to_dict(), "comm_ms": None, "exposed_comm_ms": None})
    c = Comparison([one, job])
    rows = c.communication()
    assert list(rows) == ["comm (ms)", "exposed (ms)", "collectives alone (ms)", "their bus GB/s", "link bus GB/s"]
    assert rows["collectives alone (ms)"] == [None, job.collectives["alone_ms"]]
    assert rows["exposed (ms)"] == [None, job.summary.exposed_comm_ms]
    assert f"| collectives alone (ms) | - | {job.collectives['alone_ms']:,.2f} |" in markdown(c)
    assert document(c)["communication"]["link bus GB/s"] == [None, job.collectives["link_busbw_gbps"]]
    assert f"communication,collectives alone (ms),2,{job.name}," in csv_text(c)
    assert Comparison([one, one]).communication() == {}       # no job: no rows


def test_a_missing_speedup_says_why_and_only_the_baseline_reads_baseline():
    cancelled = RunRecord(RunSpec(size="tiny", device="cpu"))
    cancelled.apply(ev.Finished("cancelled"))            # cancelled before its first measured step
    c = Comparison([cancelled, _run([5.0, 5.1, 4.9])])
    texts = [speedup_text(s) for s in c.speedups()]
    assert texts == ["baseline", "no baseline steps"]
    assert "| speedup (step) | baseline | no baseline steps |" in export.export(c, "md")
    c = Comparison([_run([5.0, 5.1, 4.9]), cancelled])
    assert [speedup_text(s) for s in c.speedups()] == ["baseline", "no measured steps"]
    assert not c.speedups()[1].significant
    doc = json.loads(export.export(c, "json"))
    assert doc["speedup"]["total_ms"][1]["text"] == "no measured steps"
    rows = [r for r in csv.reader(io.StringIO(export.export(c, "csv"))) if r[:2] == ["speedup", "total_ms.ratio"]]
    assert [r[-1] for r in rows] == ["", ""]


def test_runs_are_numbered_from_1_in_every_export():
    from perfconsole.core.reports.compare import csv_text, markdown

    a = _kernels(_run([1, 1.1]), {"ampere_sgemm_128x64_nn": 1000, "softmax_warp_forward": 500})
    b = _kernels(_run([2, 2.1]), {"ampere_sgemm_128x64_nn": 400, "softmax_warp_forward": 520})
    c = Comparison([a, b])
    md = markdown(c)
    assert "Baseline: run 1 (" in md and "| kernel | category | run 1 | run 2 | change |" in md
    assert {row["run"] for row in csv.DictReader(io.StringIO(csv_text(c)))} == {"1", "2"}


def _processes(*steps: list[float]) -> RunRecord:
    """A run of several processes: its steps pooled, and the statistics of the processes' medians."""
    from dataclasses import replace
    from statistics import median

    from perfconsole.core.stats import summarize

    r = _run([t for p in steps for t in p])
    r.summary = replace(r.summary, processes=len(steps),
                        between_processes={"total_ms": summarize([median(p) for p in steps])})
    return r


def test_the_figure_a_speedup_is_the_ratio_of_is_printed_with_its_name_by_the_cli_and_the_export():
    from perfconsole.core.cli.compare import comparison_table
    from perfconsole.core.reports.compare import markdown

    c = Comparison([_processes([10.0, 10.1, 13.0], [11.0, 11.2, 10.9]), _processes([5.0, 5.2, 4.9], [5.5, 5.6, 7.0])])
    name = c.basis()
    assert name == "mean of the processes' median steps"
    figures = [f"{r.summary.interval_stat().mean:,.3f}" for r in c.runs]
    assert figures != [f"{r.summary.total_ms.mean:,.3f}" for r in c.runs]     # steps pooled: another figure
    table = comparison_table(c).plain().splitlines()
    header = next(line for line in table if line.startswith("run\t")).split("\t")
    rows = [line.split("\t") for line in table if line[:2] in ("1:", "2:")]
    assert [row[header.index(f"{name} (ms)")] for row in rows] == figures
    md = markdown(c)
    assert f"| {name} (ms) | {figures[0]} | {figures[1]} |" in md
    rule = c.speedup_rule()
    assert name in rule and rule in md and any(rule in line for line in table), (rule, table)
    assert "pooled" in md.split("## Step and phase times")[1].splitlines()[0]   # the ± rows say what they are
    one = Comparison([_run([10.0, 10.2, 9.8]), _run([5.0, 5.1, 4.9])])
    assert one.basis() == "mean step" and "| mean step (ms) | 10.000 | 5.000 |" in markdown(one)


def _folded(processes: list[list[float]], **spec) -> RunRecord:
    """A run of several processes folded from events, each process's summary as its worker sends it."""
    s = RunSpec(size="tiny", device="cpu", steps=len(processes[0]), repeat=len(processes), **spec)
    r = RunRecord(s)
    for i, times in enumerate(processes):
        r.apply(ev.Replicate(i, len(processes)))
        steps = [ev.Step(k, False, t, t / 2, t / 4, t / 4) for k, t in enumerate(times)]
        for step in steps:
            r.apply(step)
        r.apply(ev.SummaryReady(compute_summary(s, steps, [], None).to_dict()))
    r.apply(ev.Finished("ok"))
    return r


def test_tokens_per_s_and_a_speedup_between_processes_say_why_they_differ():
    # `compare --repeat 2` said "no significant difference (1.09x, 95% CI [0.00, 1858.54])" while its tokens/s
    # differed 1.56x: the speedup is of each process's median step, tokens/s of every step pooled.
    from perfconsole.core.cli.compare import comparison_table
    from perfconsole.core.reports.compare import document, markdown

    base = _folded([[100.0, 100.0, 100.0, 900.0], [100.0, 100.0, 100.0, 100.0]])   # one process stalled once
    fast = _folded([[80.0, 80.0, 80.0, 80.0], [80.0, 80.0, 80.0, 80.0]], precision="bf16")
    c = Comparison([base, fast])
    assert c.between_processes()
    tps = c.tokens_per_s()
    assert tps[1] / tps[0] == pytest.approx(2.5) and c.speedups()[1].ratio == pytest.approx(1.25)
    verdict = "1.25x faster (too few processes for an interval: 2 a side, 3 needed)"
    assert c.speedup_texts() == ["baseline", verdict]
    note = c.throughput_note()
    assert note is not None and "run 2: 2.50x faster by tokens/s, 1.25x faster by the speedup" in note
    assert "every step of every process pooled" in note and "each process's median step" in note
    md = markdown(c)
    assert f"| speedup (step) | baseline | {verdict} |" in md and note in md
    doc = document(c)
    assert doc["throughput_note"] == note and doc["speedup"]["total_ms"][1]["text"] == verdict
    assert doc["speedup"]["total_ms"][1]["ci95_low"] is None
    table = comparison_table(c)
    assert note in table.caption and verdict in table.plain()
    rows = {(r["metric"], r["run"]): r["value"] for r in csv.DictReader(io.StringIO(export.export(c, "csv")))}
    assert float(rows[("tokens_per_s.ratio", "2")]) == pytest.approx(2.5)
    # one process a run: tokens/s and the speedup are ratios of the same mean step, and need no note
    assert Comparison([_run([10.0, 10.2, 9.8]), _run([5.0, 5.1, 4.9])]).throughput_note() is None

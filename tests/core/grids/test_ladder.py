"""The ladder end to end on the CPU with the tiny model: real child processes, one per rung; the rungs the
CPU cannot run say why; the report's table, the snapshot and the CLI."""
from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.grids.ladder import DEFAULT_RUNGS, RUNG_NAMES, RUNGS, LadderRecord, LadderRunner, LadderSpec
from perfconsole.core.reports import export
from perfconsole.core.reports.ladder import MD_COLUMNS, rows
from perfconsole.core.settings import RunSpec, SpecError

BASE = RunSpec(size="tiny", ctx=16, batch=2, precision="fp32", mode="train", warmup=1, steps=2, device="cpu")


def test_each_rung_is_the_last_plus_its_change():
    cells = LadderSpec(BASE.with_(attention="sdpa", optimizer="fused", device="cuda", precision="bf16")).cells()
    assert [c.attention for c in cells] == ["naive"] + ["sdpa"] * 7    # the first rung resets the knobs
    assert [c.compile for c in cells] == [False, False] + [True] * 6
    assert [c.optimizer for c in cells] == ["forloop"] * 3 + ["fused"] * 5
    assert [c.compile_mode for c in cells][4:] == ["reduce-overhead"] * 4
    assert [c.weights for c in cells] == ["fp32"] * 5 + ["bf16"] * 3
    assert [c.kernels for c in cells][6:] == ["liger"] * 2 and [c.fp8 for c in cells] == [False] * 7 + [True]
    assert all(c.profile == "torch" for c in cells)
    assert [r.name for r in RUNGS if not r.same_numerics] == ["bf16-weights", "fp8"]
    picked = LadderSpec(BASE, ("eager", "fused-adamw")).cells()
    assert len(picked) == 2 and picked[1].compile and picked[1].attention == "sdpa"  # skipped rungs pass their change up
    assert len(RUNGS) == 10 and RUNGS[-1].name == "checkpoint" and RUNGS[-1].opt_in   # named in --rungs to run
    every = LadderSpec(BASE.with_(precision="bf16", device="cuda"), RUNG_NAMES).cells()
    assert every[-1].checkpoint == "blocks" and every[-1].fp8 and every[-2].checkpoint == "none"


def test_a_change_the_device_rules_out_stays_on_its_rung_and_each_rung_says_its_own_reason():
    import torch

    from perfconsole.core.measure import converters

    spec = LadderSpec(BASE.with_(precision="bf16"))
    cells = dict(zip(spec.names, spec.cells()))
    assert spec.not_carried() == [("cuda-graphs", "CUDA graphs (compile mode reduce-overhead) need device cuda"),
                                  ("liger", "liger-kernel's Triton kernels need device cuda"),
                                  ("fp8", "fp8 matmuls need device cuda")]
    assert cells["cuda-graphs"].compile_mode == "reduce-overhead"
    assert cells["bf16-weights"].compile_mode == "default" and cells["bf16-weights"].weights == "bf16"
    converters.check(cells["bf16-weights"].validate(), torch.device("cpu"))  # rung 6 runs its own change on the CPU
    record = LadderRecord.new(spec)   # the rest end before any process, each with its own change's reason
    reasons = {name: r.error.message for name, r in zip(spec.names, record.runs) if r.error}
    assert reasons == {"cuda-graphs": "unsupported: CUDA graphs (compile mode reduce-overhead) need device cuda",
                       "liger": "unsupported: liger-kernel's Triton kernels need device cuda",
                       "fp8": "unsupported: fp8 matmuls need device cuda"}
    assert cells["fp8"].kernels == "torch" and cells["fp8"].weights == "bf16"
    from perfconsole.core.reports.ladder import markdown

    assert ("- not carried up on cpu bf16: cuda-graphs (CUDA graphs (compile mode reduce-overhead) need device cuda), "
            "liger (liger-kernel's Triton kernels need device cuda)\n") in \
        markdown(LadderRecord.new(spec))
    fp32 = LadderSpec(BASE).cells()   # at fp32 bf16 weights cannot apply: its rung says so, the rest go without it
    assert fp32[5].weights == "bf16" and fp32[6].weights == "fp32"


def test_the_categories_that_moved_add_up_to_the_step_change():
    # A ladder recorded on the CPU: its compiled fused-AdamW rung's first profiled step took 483 ms, so its ops
    # summed to 168 ms per profiled step beside a 44 ms median, and every category seemed to go up.
    from pathlib import Path

    recorded = store.load(Path(__file__).resolve().parents[2] / "fixtures" / "ladders" / "ladder_tiny_cpu.json")
    ran = [r for r in rows(recorded) if r.median_ms is not None]
    assert len(ran) == 4
    for previous, row in zip(ran, ran[1:]):
        cats = set(row.category_ms) | set(previous.category_ms)
        moved = sum(row.category_ms.get(c, 0.0) - previous.category_ms.get(c, 0.0) for c in cats)
        assert moved == pytest.approx(row.median_ms - previous.median_ms, abs=1e-6)
        assert sum(row.category_ms.values()) == pytest.approx(row.median_ms)


def test_no_rungs_named_is_the_bases_defaults():
    assert LadderSpec(BASE).rungs == LadderSpec(BASE, ()).rungs == DEFAULT_RUNGS
    assert "fp8" in DEFAULT_RUNGS and "checkpoint" not in DEFAULT_RUNGS


@pytest.mark.parametrize("kw, field", [(dict(rungs=("eager", "turbo")), "rungs"),
                                       (dict(base=BASE.with_(nproc=2, parallel="ddp"), rungs=("eager",)), "rungs"),
                                       (dict(rungs=("sdpa", "sdpa")), "rungs"),
                                       (dict(base=BASE.with_(mode="fwd")), "mode"),
                                       (dict(base=BASE.with_(steps=1)), "steps")])
def test_bad_ladders_name_the_field(kw, field):
    with pytest.raises(SpecError) as e:
        LadderSpec(**{"base": BASE, **kw}).validate()
    assert e.value.field == field


@pytest.fixture(scope="module")
def ladder(tmp_path_factory):
    spec = LadderSpec(BASE, ("eager", "sdpa", "cuda-graphs", "liger", "fp8")).validate()
    record = LadderRecord.new(spec)
    save = tmp_path_factory.mktemp("ladder") / "ladder.json"
    LadderRunner(record, save_to=save, start_ahead=2).run()
    return record, save


@pytest.mark.e2e
def test_the_cpu_runs_what_it_can_and_says_why_for_the_rest(ladder):
    record, _ = ladder
    assert [r.status for r in record.runs] == ["ok", "ok", "unsupported", "unsupported", "unsupported"]
    reasons = [r.error.message for r in record.runs[2:]]
    assert reasons[0] == "unsupported: CUDA graphs (compile mode reduce-overhead) need device cuda"
    assert "liger-kernel is not installed" in reasons[1] or "liger-kernel's Triton kernels need device cuda" in reasons[1]
    assert "torchao" in reasons[2] or "fp8" in reasons[2]
    assert record.status == "ok"


@pytest.mark.e2e
def test_rows_compare_with_the_first_and_previous_rung(ladder):
    record, _ = ladder
    first, second, *rest = rows(record)
    assert first.speedup_vs_first == pytest.approx(1.0) and first.speedup_vs_previous is None
    assert second.speedup_vs_first == pytest.approx(first.median_ms / second.median_ms)
    assert second.speedup_vs_previous == second.speedup_vs_first
    # naive and sdpa attention in fp32: the same losses within fp32 tolerance, step by step.
    assert first.loss_max_rel_diff == 0.0 and second.numerics == "same" and second.loss_max_rel_diff < 1e-3
    assert 0 < first.sol_fraction and first.floor_ms > 0
    assert first.category_ms and sum(first.category_ms.values()) > 0    # from the rung's profiler pass
    assert all(r.median_ms is None and r.reason for r in rest)


@pytest.mark.e2e
def test_markdown_table_shape_and_snapshot_round_trip(ladder):
    record, save = ladder
    md = export.export(record, "md")
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert table[0] == "| " + " | ".join(MD_COLUMNS) + " |"
    assert len(table) == 2 + 5 and all(line.count("|") == len(MD_COLUMNS) + 1 for line in table)
    assert "| 5 cuda-graphs +compile +fused-adamw |" in md and "| 7 liger |" in md and "unsupported: CUDA graphs" in md   # numbered by its place in the ladder
    loaded = store.load(save)
    assert loaded.kind == "ladder" and [r.status for r in loaded.runs] == [r.status for r in record.runs]
    assert export.export(loaded, "md") == md
    doc = json.loads(export.export(loaded, "json"))
    assert [r["name"] for r in doc["rungs"]] == ["eager", "sdpa", "cuda-graphs", "liger", "fp8"]
    csv_lines = export.export(loaded, "csv").splitlines()
    assert len(csv_lines) == 6 and csv_lines[0].startswith("rung,name,status")


@pytest.mark.e2e
def test_the_best_rung_never_differs_and_one_that_rounds_on_purpose_names_the_best_that_does_not(ladder, monkeypatch):
    from perfconsole.core.reports import ladder as report

    record, _ = ladder
    made = [report.LadderRow(i + 1, name, "", "ok", median_ms=ms, speedup_vs_first=100 / ms, numerics=numerics)
            for i, (name, ms, numerics) in enumerate([("eager", 100.0, "same"), ("sdpa", 50.0, "same"),
                                                      ("bf16-weights", 40.0, "differs by design"),
                                                      ("liger", 30.0, "DIFFERS")])]
    monkeypatch.setattr(report, "rows", lambda _ladder: made)
    md = report.markdown(record)
    assert "Best rung: **3 bf16-weights**, 40.00 ms (2.50x the first rung; it rounds differently on purpose)." in md
    assert "Best rung with the first rung's numerics: **2 sdpa**, 50.00 ms (2.00x the first rung)." in md
    made[2].numerics = "DIFFERS"
    md = report.markdown(record)
    assert "Best rung: **2 sdpa**" in md and "with the first rung's numerics" not in md
    from perfconsole.core.cli import ladder as cli_ladder

    # The CLI holds its own reference to `rows` once imported (an earlier test may have imported it).
    monkeypatch.setattr(cli_ladder, "rows", lambda _ladder: made)
    assert cli_ladder.ladder_table(record).caption == "Best rung: 2 sdpa, 50.00 ms (2.00x the first rung)."   # the CLI says it too


def test_cli_ladder_json_and_bad_rungs(tmp_path):
    (tmp_path / ("d" * 70)).mkdir()
    cmd = [sys.executable, "-m", "perfconsole.core.cli.main", "ladder", "--device", "cpu", "--size", "tiny",
           "--ctx", "16", "--batch", "2", "--precision", "fp32", "--warmup", "1", "--steps", "2",
           "--rungs", "eager,fp8", "--no-profile", "--json", "--save", str(tmp_path / ("d" * 70) / "l.json")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "ladder" and [r["status"] for r in doc["data"]["runs"]] == ["ok", "unsupported"]
    assert (tmp_path / ("d" * 70) / "l.json").read_text() == out.stdout
    # A path past 80 columns stays on its one "saved" line (the log's reader wraps it, not the CLI).
    assert out.stderr.splitlines()[-1] == f"saved {tmp_path / ('d' * 70) / 'l.json'}", out.stderr
    said = " ".join(out.stderr.split())  # the progress lines, unwrapped: the reason's brackets are kept
    assert ("fp8: unsupported: torchao is not installed: install perfconsole[fast]" in said
            or "unsupported: fp8 matmuls need device cuda" in said), said
    assert "unsupported (unsupported" not in said, out.stderr                # the reason's kind said once
    bar = out.stderr.splitlines()[-2]      # the bar's last state, before "saved ...": only the label gives way
    assert re.search(r"\d/2 \d+:\d\d:\d\d · left (estimating|\d+m\d\ds)$", bar.rstrip()), out.stderr
    bad = subprocess.run(cmd[:-6] + ["--rungs", "eager,warp"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "rungs: must be names from " + ", ".join(
        n for n in RUNG_NAMES if n != "sdpa-causal") in bad.stderr   # the builtin's ladder: no hf-only rung


def test_resume_runs_the_rungs_that_did_not_finish_and_keeps_the_rest(ladder, tmp_path):
    from perfconsole.core.record import RunRecord

    record, save = ladder
    stopped = store.load(save)
    stopped.runs[1] = RunRecord(stopped.runs[1].spec, name=stopped.runs[1].name)
    stopped.runs[1].status = "cancelled"       # as a ladder stopped by a time cap leaves its rung
    stopped.status = "cancelled"
    path = tmp_path / "stopped.json"
    store.save(stopped, path)
    cmd = [sys.executable, "-m", "perfconsole.core.cli.main", "ladder", "--resume", str(path), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    resumed = store.load(path)
    assert resumed.status == "ok" and [r.status for r in resumed.runs] == [r.status for r in record.runs]
    assert resumed.runs[0].to_dict() == record.runs[0].to_dict()                 # kept as it was
    assert resumed.runs[1].steps and resumed.runs[1].id != record.runs[1].id     # measured again
    assert len(resumed.machines()) == 1 and "rungs ran on more than one machine" not in export.export(resumed, "md")
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "every rung has finished; nothing to resume" in again.stderr
    other = tmp_path / "run.json"
    store.save(record.runs[0], other)
    wrong = subprocess.run(cmd[:-2] + [str(other)], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "a run snapshot, not a ladder" in wrong.stderr


@pytest.mark.e2e
def test_a_ladder_from_two_machines_says_which_rungs_ran_where(ladder):
    record, _ = ladder
    copy = LadderRecord.from_dict(record.to_dict())
    copy.runs[1].environment = {**copy.runs[1].environment, "host": "other-host"}
    md = export.export(copy, "md")
    assert "- rungs ran on more than one machine: " in md and "other-host (" in md and ": sdpa" in md


@pytest.mark.e2e
def test_a_rung_whose_kernels_sum_past_its_step_is_named(ladder):
    record, _ = ladder
    copy = LadderRecord.from_dict(json.loads(json.dumps(record.to_dict())))   # nothing shared with the fixture
    overhead = copy.runs[1].profile.overhead
    overhead["kernel_ms_per_step"] = 3 * overhead["profiled_ms"]
    md = export.export(copy, "md")
    assert "- rung 2 sdpa: its kernels sum to " in md and "counted some kernels more than once" in md
    assert "- rung 1 eager:" not in md and "more than once" not in export.export(record, "md")


@pytest.mark.e2e
def test_a_rung_above_one_that_rounds_on_purpose_differs_by_design_too(ladder):
    record, _ = ladder
    doc = json.loads(json.dumps(record.to_dict()))
    doc["spec"]["rungs"] = ["eager", "sdpa", "bf16-weights", "liger"]
    doc["runs"] = [json.loads(json.dumps(doc["runs"][i])) for i in (0, 1, 1, 1)]   # real runs in those places
    doc["cell_seconds"] = doc["cell_seconds"][:4]
    for run in doc["runs"][2:]:
        run["spec"]["weights"] = "bf16"
    made = rows(LadderRecord.from_dict(doc))
    assert [r.numerics for r in made] == ["same", "same", "differs by design", "differs by design"]
    # A ladder saved before the bf16-weights rung: its liger rung carried fp32 weights, and says so.
    del doc["runs"][3]["spec"]["weights"]
    assert rows(LadderRecord.from_dict(doc))[3].numerics == "same"


def test_an_hf_ladder_climbs_sdpa_causal_after_compile_and_other_models_do_not():
    """Llama-1B's compiled attention went through a dense mask until --sdpa-causal (docs/results/llama1B_why_h200.md):
    an hf: model's ladder has that rung after compile, carried up; the builtin's and a factory's ladders have no
    such rung, and naming it says why."""
    hf = RunSpec(model="hf:llama", size="tiny", device="cpu", mode="train", ctx=16, batch=2)
    spec = LadderSpec(hf)
    assert spec.rungs[spec.rungs.index("compile") + 1] == "sdpa-causal"
    cells = dict(zip(spec.names, spec.cells()))
    assert not cells["compile"].sdpa_causal and cells["sdpa-causal"].sdpa_causal and cells["fp8"].sdpa_causal
    assert "sdpa sdpa-causal compile" in cells["sdpa-causal"].label()
    assert "sdpa-causal" not in LadderSpec(BASE).names and "sdpa-causal" not in DEFAULT_RUNGS
    with pytest.raises(SpecError, match="rungs: sdpa-causal is a rung for hf: models, not for a builtin model"):
        LadderSpec(BASE, ("compile", "sdpa-causal")).validate()
    factory = RunSpec(model="docs/examples/student_model.py:build", device="cpu", mode="train")
    assert "sdpa-causal" not in LadderSpec(factory).rungs


RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "ladders" / "ladder_tiny_cpu.json"


def picked(names: tuple[str, ...]) -> LadderRecord:
    """The recorded CPU ladder's runs of those rungs, as `--rungs` naming them would have left them."""
    recorded = store.load(RECORDED)
    runs = dict(zip(recorded.spec.rungs, recorded.runs))
    return LadderRecord(LadderSpec(recorded.spec.base, names), [runs[n] for n in names])


def test_a_rung_names_the_changes_it_carries_from_rungs_left_out_in_every_export():
    """`--rungs eager,sdpa,fused-adamw`: compile, left out, passes its change up, so the fused-AdamW rung ran
    compiled and its ratio over sdpa is two changes. Only the Markdown said a rung was left out, not where it went."""
    ladder = picked(("eager", "sdpa", "fused-adamw"))
    assert ladder.runs[2].spec.compile and not ladder.runs[1].spec.compile
    eager, sdpa, fused = rows(ladder)
    assert (eager.carries, sdpa.carries, fused.carries) == ([], [], ["compile"])
    assert (sdpa.previous_rung, sdpa.previous_spans) == (1, []) and (fused.previous_rung, fused.previous_spans) == (
        2, ["compile"])
    md = export.export(ladder, "md")
    assert "| 4 fused-adamw +compile | fused AdamW" in md and "| 2 sdpa | " in md
    assert "- 4 fused-adamw's vs prev is over 2 sdpa, so it includes compile's change too\n" in md
    assert "- +name after a rung: a rung left out, whose change it carries too\n" in md
    table = list(csv.DictReader(io.StringIO(export.export(ladder, "csv"))))
    assert [(r["carries"], r["previous_rung"], r["previous_spans"]) for r in table] == [
        ("", "", ""), ("", "1", ""), ("compile", "2", "compile")]
    doc = json.loads(export.export(ladder, "json"))
    assert [(r["carries"], r["previous_spans"]) for r in doc["rungs"]] == [([], []), ([], []), (["compile"], ["compile"])]
    # The first rung shown names what it carries above eager; the whole ladder's rows carry nothing, and a change
    # the ladder's precision kept on its own rung (bf16 weights at fp32, left out here) is not named above it.
    assert [r.carries for r in rows(picked(("compile", "fused-adamw")))] == [["sdpa"], []]
    whole = rows(store.load(RECORDED))
    assert all(r.carries == [] and r.previous_spans == [] for r in whole) and "+name" not in export.export(
        store.load(RECORDED), "md")


def test_a_ratio_over_a_rung_below_one_that_did_not_run_says_it_includes_that_rung_s_change():
    ladder = picked(("eager", "sdpa", "compile"))
    ladder.runs[1] = LadderRecord.from_dict(ladder.to_dict()).runs[1]
    ladder.runs[1].status, ladder.runs[1].summary = "oom", None
    compiled = rows(ladder)[2]
    assert compiled.carries == [] and (compiled.previous_rung, compiled.previous_spans) == (1, ["sdpa"])
    assert "- 3 compile's vs prev is over 1 eager, so it includes sdpa's change too\n" in export.export(ladder, "md")


def test_the_interval_beside_the_median_step_is_the_median_s_and_three_steps_have_none():
    ladder = store.load(RECORDED)   # three steps a rung, one process, saved with intervals of the geometric mean
    md = export.export(ladder, "md")
    assert ("- interval: 95%, of the median of the steps of one process (order statistics); '-' with fewer than 6 "
            "steps, too few for one") in md and "t-interval on log times" not in md
    timed = [row for row in rows(ladder) if row.median_ms is not None]
    assert timed and all(row.interval_low_ms is None and row.interval_high_ms is None for row in timed)

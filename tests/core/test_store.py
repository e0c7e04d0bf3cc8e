import json
import os
from pathlib import Path

import pytest

from perfconsole.core import events as ev
from perfconsole.core import store
from perfconsole.core.reports.export import export
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.core.stats import interval_text
from perfconsole.core.run_summary import compute_summary

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"

SPEC = RunSpec(size="tiny", ctx=32, batch=2, device="cpu", warmup=1, steps=3, mode="train")


def finished_record() -> RunRecord:
    r = RunRecord(SPEC)
    r.apply(ev.RunStarted(SPEC.to_dict(), {"device": "cpu", "torch": "2.13.0"}, 1))
    r.apply(ev.Step(0, True, 30.0, 10.0, 15.0, 5.0))
    for i, t in enumerate((10.0, 12.0, 11.0), start=1):
        r.apply(ev.Step(i, False, t, t / 2, t / 3, t / 6))
    r.apply(ev.Finished("ok"))
    return r


def test_record_folds_events_and_computes_summary_on_finish():
    r = finished_record()
    assert r.status == "ok" and len(r.steps) == 3 and len(r.warmup_steps) == 1
    assert r.summary.total_ms.mean == pytest.approx(11.0)
    assert r.summary.total_ms.median == 11.0 and r.summary.warmup_ms == [30.0]


def test_snapshot_round_trip(tmp_path):
    r = finished_record()
    r.apply(ev.ProfileReady("torch", ["t.json"], {"cuda_gpu_kern_sum": [{"name": "k", "total_time_ns": 7}]}))
    path = store.save(r, tmp_path / "run.json")
    doc = json.loads(path.read_text())
    assert doc["schema"] == store.SCHEMA_VERSION and doc["kind"] == "run"
    back = store.load(path)
    assert back.to_dict() == r.to_dict()
    assert back.profile.tables["cuda_gpu_kern_sum"][0]["total_time_ns"] == 7


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    r = finished_record()
    path = tmp_path / "run.json"
    store.save(r, path)
    before = path.read_text()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", boom)
    r.name = "changed"
    with pytest.raises(OSError):
        store.save(r, path)
    assert path.read_text() == before  # the old snapshot is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_saved_file_takes_the_umask_and_a_replaced_one_keeps_its_mode(tmp_path):
    # mkstemp creates 0600: a snapshot or export others should read must not end up private.
    old = os.umask(0o022)
    try:
        new = store.save(finished_record(), tmp_path / "new.json")
        kept = tmp_path / "kept.json"
        kept.write_text("x")
        kept.chmod(0o640)
        store.save(finished_record(), kept)
    finally:
        os.umask(old)
    assert oct(new.stat().st_mode & 0o777) == oct(0o644)
    assert oct(kept.stat().st_mode & 0o777) == oct(0o640)


@pytest.mark.parametrize("text, words", [
    ("{", "bad JSON"),
    ('{"a": 1}', "no kind"),
    ('{"schema": 99, "kind": "run", "data": {}}', "schema 99"),
    ('{"schema": 1, "kind": "pizza", "data": {}}', "unknown snapshot kind"),
    ('{"schema": 1, "kind": "run", "data": {"id": "x"}}', "damaged run snapshot"),
])
def test_bad_snapshots_name_the_file(tmp_path, text, words):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(store.SnapshotError) as e:
        store.load(p)
    assert str(p) in str(e.value) and words in str(e.value)


def test_save_refuses_directories_and_missing_parents(tmp_path):
    with pytest.raises(store.SnapshotError, match="directory"):
        store.save(finished_record(), tmp_path)
    with pytest.raises(store.SnapshotError, match="no such directory"):
        store.save(finished_record(), tmp_path / "nope" / "run.json")


def test_exports_of_a_run():
    r = finished_record()
    md = export(r, "md")
    assert "| size | ctx | mode | precision | avg_ms | std_ms |" in md
    assert "| tiny | 32 | train | fp32 | 11.000 | 1.000 |" in md
    assert "backward / forward = 0.67" in md
    lines = export(r, "csv").splitlines()
    assert lines[0].startswith("run,size,ctx") and len(lines) == 5
    doc = json.loads(export(r, "json"))
    assert doc["status"] == "ok" and doc["summary"]["total_ms"]["median"] == 11.0
    with pytest.raises(ValueError, match="format: must be one of md, csv, json"):
        export(r, "xlsx")


def test_an_older_run_json_document_loads_as_the_run(tmp_path):
    r = finished_record()
    p = tmp_path / "old.json"
    p.write_text(export(r, "json"))  # the document `run --json` printed before it printed snapshots
    back = store.load(p)
    assert isinstance(back, RunRecord) and back.to_dict() == r.to_dict()


def test_an_older_run_json_document_with_a_profile_says_its_tables_are_elsewhere(tmp_path):
    r = finished_record()
    r.apply(ev.ProfileReady("torch", ["t.json"], {"cuda_gpu_kern_sum": [{"name": "k", "total_time_ns": 7}]}))
    back = store.loads(export(r, "json"), "old.json")
    assert back.profile.profiler == "torch" and back.profile.tables == {}
    assert "old.json" in back.profile.warnings[-1] and "cuda_gpu_kern_sum" in back.profile.warnings[-1]


def _before_median_intervals(d):
    """A record's dict as it was saved before intervals were the median's: no `ci95_of` in its statistics."""
    if isinstance(d, dict):
        return {k: _before_median_intervals(v) for k, v in d.items() if k != "ci95_of"}
    return [_before_median_intervals(v) for v in d] if isinstance(d, list) else d


def test_an_older_record_shows_the_median_s_interval_from_its_steps():
    path = SNAPSHOTS / "tiny-cpu-train-fp32.json"
    saved = json.loads(path.read_text())["data"]["summary"]["total_ms"]
    assert "ci95_of" not in saved   # shipped with an interval of the geometric mean
    r = store.load(path)
    totals = sorted(s.total_ms for s in r.steps)
    t = r.summary.total_ms
    assert len(totals) == t.n == 8 and (t.ci95_low, t.ci95_high, t.ci95_of) == (totals[0], totals[-1], "median")
    assert (t.ci95_low, t.ci95_high) != (saved["ci95_low"], saved["ci95_high"])
    assert f"| {interval_text(t.ci95_low, t.ci95_high)} |" in export(r, "md")
    # processes: each one's statistics from its steps, those between them from the processes' medians
    spec = SPEC.with_(repeat=6)
    rec = RunRecord(spec)
    for i in range(6):
        rec.apply(ev.Replicate(i, 6))
        steps = [ev.Step(k, False, 10.0 + i + k * (i + 1), 5.0, 3.0, 2.0 + i + k * (i + 1)) for k in range(7)]
        for st in steps:
            rec.apply(st)
        rec.apply(ev.SummaryReady(compute_summary(spec, steps, [], None).to_dict()))
    rec.apply(ev.Finished("ok"))
    old = RunRecord.from_dict(_before_median_intervals(rec.to_dict()))
    assert old.to_dict() == rec.to_dict()
    assert old.summary.between_processes["total_ms"].ci95_low is not None
    # a job of two ranks: too few for an interval between them, so its weak-scaling efficiency has none (it had
    # [8.4 %, 62.0 %] around 46.6 % from the geometric mean's interval on one degree of freedom)
    job = store.load(SNAPSHOTS.parent / "tests" / "fixtures" / "parallel" / "ddp2_tiny_cpu.json")
    assert job.summary.between_processes["total_ms"].too_few and job.summary.scaling_efficiency_ci95 is None
    assert job.summary.scaling_efficiency is not None
    # a statistic whose values the record no longer holds keeps no interval: "-", not the geometric mean's
    gone = _before_median_intervals(finished_record().to_dict())
    gone["steps"] = []
    assert RunRecord.from_dict(gone).summary.total_ms.ci95_of is None


def test_save_and_dumps_are_the_same_text(tmp_path):
    r = finished_record()
    assert store.save(r, tmp_path / "r.json").read_text() == store.dumps(r)


@pytest.mark.parametrize("data, words", [
    (b"[" * 100_000, "nested too deeply"),
    (b'{"a": "\xff"}', "not UTF-8: byte 0xff at offset 7"),
    (b"1" * 5000, "not a perfconsole snapshot"),  # past Python's digits limit: a ValueError, not a traceback
    (b'{"schema": 1, "kind": "run", "data": []}', "damaged run snapshot"),
], ids=["deep", "not-utf8", "long-int", "data-a-list"])
def test_unreadable_inputs_are_snapshot_errors_naming_the_file(tmp_path, data, words):
    p = tmp_path / "bad.json"
    p.write_bytes(data)
    with pytest.raises(store.SnapshotError) as e:
        store.load(p)
    assert str(e.value).startswith(f"{p}: ") and words in str(e.value)


def test_a_directory_or_a_missing_file(tmp_path):
    with pytest.raises(store.SnapshotError, match="is a directory"):
        store.load(tmp_path)
    with pytest.raises(store.SnapshotError, match="nope.json: no such file or directory"):
        store.load(tmp_path / "nope.json")


def test_dash_is_stdin_unless_stdin_is_off(tmp_path, monkeypatch):
    import io
    import sys

    r = finished_record()

    class Pipe(io.TextIOWrapper):
        def isatty(self) -> bool:
            return False

    monkeypatch.setattr(sys, "stdin", Pipe(io.BytesIO(store.dumps(r).encode())))
    assert store.load("-").to_dict() == r.to_dict()
    monkeypatch.chdir(tmp_path)
    store.save(r, tmp_path / "-")
    assert store.load("-", stdin=False).to_dict() == r.to_dict()  # the console opens a file named "-"


def test_writable_file_proves_the_directory_takes_a_file(tmp_path):
    assert store.writable_file(tmp_path / "r.json") == tmp_path / "r.json"
    assert list(tmp_path.iterdir()) == []  # the probe is gone
    with pytest.raises(store.SnapshotError, match="cannot create a file in /proc"):
        store.writable_file("/proc/perfconsole-test.json")
    fifo = tmp_path / "fifo"  # like a device: writing a file over it would replace it
    os.mkfifo(fifo)
    with pytest.raises(store.SnapshotError, match="not a regular file"):
        store.writable_file(fifo)
    with pytest.raises(store.SnapshotError, match="no such directory"):
        store.writable_file(tmp_path / "nope" / "r.json")

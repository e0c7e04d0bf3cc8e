"""A run's telemetry travels from the worker's event to the record, the snapshot and the report."""
from __future__ import annotations

import json

from perfconsole.core import events as ev
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.export import export
from perfconsole.core.settings import RunSpec
from perfconsole.core.telemetry.gpu_summary import Telemetry
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "telemetry"


def _telemetry(name: str) -> dict:
    doc = json.loads((FIXTURES / name).read_text())
    return Telemetry.from_samples(doc["samples"], doc["period_s"]).to_dict()


def test_a_throttled_run_says_so_in_its_record_and_report():
    record = RunRecord(RunSpec(size="tiny", device="cpu", steps=2))
    data = _telemetry("h200_power_capped.json")
    record.apply(ev.decode(ev.Telemetry(data).to_json()))  # through the wire format
    again = RunRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.telemetry == record.telemetry == data
    md = export(again, "md")
    assert "GPU telemetry" in md and "sw_power_cap" in md and "SM clock fell 14.4%" in md
    assert json.loads(export(again, "json"))["telemetry"]["flags"] == data["flags"]


def test_a_healthy_run_has_no_flag():
    record = RunRecord(RunSpec(size="tiny", device="cpu", steps=2))
    record.apply(ev.Telemetry(_telemetry("h200_healthy.json")))
    assert record.telemetry["flags"] == []
    assert "fell" not in export(record, "md")


def test_a_real_h200_recording_reads_back_whole():
    doc = json.loads((FIXTURES / "h200_recorded_2.7B_train.json").read_text())
    t = Telemetry.from_dict(doc["telemetry"])
    assert t.samples == 16 and t.summary["sm_clock_mhz"]["min"] == 1980.0
    assert t.summary["power_limit_w"]["max"] == 700.0 and t.flags() == []
    assert Telemetry.from_dict(json.loads(json.dumps(t.to_dict()))).to_dict() == t.to_dict()


def test_the_csv_export_carries_the_flags_on_every_row():
    import csv
    import io

    record = RunRecord(RunSpec(size="tiny", device="cpu", steps=2, warmup=0))
    record.apply(ev.Step(0, False, 2.0, 1.0, 1.0))
    record.apply(ev.Step(1, False, 2.0, 1.0, 1.0))
    record.apply(ev.Telemetry(_telemetry("h200_power_capped.json")))
    rows = list(csv.DictReader(io.StringIO(export(record, "csv"))))
    assert len(rows) == 2 and all("SM clock fell 14.4%" in r["gpu_flags"] for r in rows)
    assert [r["process"] for r in rows] == ["1", "1"]

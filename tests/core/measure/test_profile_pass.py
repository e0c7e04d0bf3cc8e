"""The profile pass says what it took (its profiled steps, the trace, the tables) and reads the trace once: the
kernel tables, the GPU's busy share and a rank's overlap come from the same parsed events. An eager 2.7B ladder
cell on an H200 spent 8.8 s after its measured steps, 17.8 s in all (docs/results/gpu_loop_ladder_fp8_h200.md)."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from perfconsole.core import events as ev
from perfconsole.core.measure import bench
from perfconsole.core.measure.environment import collect
from perfconsole.core.profiling import torch_profiler
from perfconsole.core.profiling.overlap import events_overlap, trace_overlap
from perfconsole.core.profiling.torch_trace import gpu_busy_ms, gpu_busy_ms_of_events, tables_of_events
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.run import markdown, run_document
from perfconsole.core.settings import RunSpec
from perfconsole.model import annotate

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
DDP_TRACE = FIXTURES / "ddp_traces" / "h100_small_ddp2_rank0_3steps.json.gz"


def _run(tmp_path, monkeypatch, device: str) -> tuple[list[ev.Event], list[str]]:
    """A real profiled run; the texts json.loads parsed in the torch profiler's module, by their size."""
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(tmp_path / "data"))
    parsed: list[str] = []
    real = json.loads

    def counting(text, *a, **k):
        parsed.append(text)
        return real(text, *a, **k)

    monkeypatch.setattr(torch_profiler.json, "loads", counting)
    size, precision = ("tiny", "fp32") if device == "cpu" else ("small", "bf16")
    spec = RunSpec(size=size, ctx=16 if device == "cpu" else 256, batch=2, precision=precision, mode="train",
                   warmup=1, steps=3, device=device, profile="torch").validate()
    events: list[ev.Event] = []
    try:
        bench.run(spec, events.append, collect(device), tmp_path)
    finally:
        annotate.set_range_factory(None, False)
    return events, parsed


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.shares_gpu])])
def test_the_pass_says_its_seconds_and_the_record_and_exports_keep_them(tmp_path, monkeypatch, device):
    events, parsed = _run(tmp_path, monkeypatch, device)
    ready = next(e for e in events if isinstance(e, ev.ProfileReady))
    assert list(ready.seconds) == ["steps", "trace", "tables"]
    assert ready.seconds["steps"] > 0 and all(v >= 0 for v in ready.seconds.values())
    if device == "cuda":  # the tables, the busy share: one parse of the one trace
        assert len(parsed) == 1 and len(parsed[0]) == Path(ready.files[0]).stat().st_size
        overhead = next(e for e in events if isinstance(e, ev.ProfileOverhead))
        assert overhead.gpu_busy_share is not None and ready.tables.get("cuda_gpu_kern_sum")

    record = RunRecord(RunSpec(size="tiny", device=device).validate())
    for e in events:
        record.apply(e)
    assert RunRecord.from_dict(record.to_dict()).profile.seconds == ready.seconds
    assert run_document(record)["profile"]["seconds"] == ready.seconds
    line = next(x for x in markdown(record).splitlines() if x.startswith("- profile pass: "))
    assert line == "- profile pass: " + " · ".join(f"{k} {v:.1f} s" for k, v in ready.seconds.items())


def test_a_record_saved_before_the_pass_said_its_seconds_loads_without_them():
    d = RunRecord(RunSpec(size="tiny", device="cpu").validate()).to_dict()
    d["profile"] = {"profiler": "torch", "files": [], "tables": {}, "warnings": [], "overhead": None}
    r = RunRecord.from_dict(d)
    assert r.profile.seconds == {} and "profile pass" not in markdown(r)


def test_the_parsed_events_give_what_the_trace_s_text_gives():
    text = gzip.open(DDP_TRACE, "rt", encoding="utf-8").read()
    events = json.loads(text)["traceEvents"]
    assert gpu_busy_ms_of_events(events) == gpu_busy_ms(text) is not None
    assert events_overlap(events) == trace_overlap(DDP_TRACE)
    assert events_overlap(events).comm_kernels > 0
    tables, warnings = tables_of_events(events, DDP_TRACE.name)
    assert not warnings and len(tables["cuda_gpu_kern_sum"]) > 10

import json

import pytest

from perfconsole.core import events as ev


@pytest.mark.parametrize("event", [
    ev.RunStarted({"size": "tiny"}, {"device": "cpu"}, 123),
    ev.Progress("warmup", "2 steps"),
    ev.Step(3, False, 10.5, 4.0, 5.0, 1.5),
    ev.Step(0, True, 10.5, 10.5),
    ev.SummaryReady({"total_ms": {"mean": 1.0}}),
    ev.Memory(100.0, 200.0, {"forward": {"peak_allocated_mib": 50.0}}),
    ev.ProfileReady("torch", ["trace.json"], {"cuda_gpu_kern_sum": [{"name": "k", "total_time_ns": 5}]}),
    ev.Error("oom", "CUDA out of memory", "trace"),
    ev.Provenance(123, "nsys", ["libToolsInjection64.so mapped"], {"NSYS_PROFILING_SESSION_ID": "1"},
                  ["libToolsInjection64.so"], "/proc/self/maps"),
    ev.Provenance(124, None),
    ev.ProfileOverhead("torch", 1.0, 2.0, 2.0, 3, 3, provenance={"pid": 123, "profiler": "torch"}),
    ev.Finished("ok"),
])
def test_round_trip(event):
    line = event.to_json()
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["v"] == ev.EVENT_VERSION and obj["type"] == event.type
    assert ev.decode(line) == event


def test_unknown_fields_are_ignored_for_forward_compatibility():
    line = json.dumps({"v": 1, "type": "finished", "status": "ok", "new_field": 1})
    assert ev.decode(line) == ev.Finished("ok")


@pytest.mark.parametrize("line, words", [
    ("not json", "not JSON"),
    ("[1, 2]", "not an event"),
    ('{"v": 2, "type": "finished", "status": "ok"}', "version"),
    ('{"v": 1, "type": "party"}', "unknown event type"),
    ('{"v": 1, "type": "step", "index": 1}', "bad step event"),
])
def test_bad_lines(line, words):
    with pytest.raises(ev.EventError, match=words):
        ev.decode(line)


def test_nan_is_refused_not_written():
    with pytest.raises(ValueError):
        ev.Step(0, False, float("nan"), 1.0).to_json()


def test_a_profile_event_writes_its_frame_held_tables_as_rows():
    """A torch trace's tables are frames (ProfileTable) on CUDA; the worker writes them into its event
    stream as rows, and they come back equal (a ProfileTable in the event crashed every CUDA torch run)."""
    import gzip

    from helpers import FIXTURES
    from perfconsole.core.profiling.torch_trace import parse_torch_trace

    text = gzip.open(FIXTURES / "torch_traces" / "h200_llama1B_bf16w_cudagraphs_3steps.json.gz", "rt").read()
    tables, _ = parse_torch_trace(text, "trace.json")
    assert type(tables["cuda_gpu_kern_sum"]).__name__ == "ProfileTable"
    back = ev.decode(ev.ProfileReady("torch", ["trace.json"], tables).to_json())
    assert back.tables["cuda_gpu_kern_sum"] == list(tables["cuda_gpu_kern_sum"])

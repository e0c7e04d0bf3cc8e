"""The rooms a spec walks through in the timed loop: the perfconsole modules whose code runs while `bench.run`
runs a tiny CPU spec (a second run, so nothing is entered only to be imported; calls made while importing are
left out as well). 20 modules at the commit before the house's reshaping (656bee7^), 19 since the faster paths
joined the converters and the FLOP count joined the model's build, 20 again since the host's figures over the
measured steps (core.measure.host_time) joined; a new module on this path is a choice, made here."""
from __future__ import annotations

import sys

from perfconsole.core.measure import bench
from perfconsole.core.measure.environment import collect
from perfconsole.core.settings import RunSpec

ROOMS = {
    "perfconsole.core.events", "perfconsole.core.flops", "perfconsole.core.paths", "perfconsole.core.run_summary",
    "perfconsole.core.settings", "perfconsole.core.stats",
    "perfconsole.core.measure.bench", "perfconsole.core.measure.converters", "perfconsole.core.measure.device_peaks",
    "perfconsole.core.measure.host_time", "perfconsole.core.measure.memory_profile", "perfconsole.core.measure.model_build",
    "perfconsole.core.measure.pipeline", "perfconsole.core.measure.provenance", "perfconsole.core.measure.start",
    "perfconsole.model.annotate", "perfconsole.model.config", "perfconsole.model.sources",
    "perfconsole.model.sources.builtin", "perfconsole.model.transformer",
}


def _importing(frame) -> bool:  # noqa: ANN001
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def test_a_tiny_cpu_train_run_enters_the_twenty_rooms_of_the_timed_loop(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFCONSOLE_DATA_DIR", str(tmp_path / "data"))
    spec = RunSpec(size="tiny", ctx=16, batch=2, precision="fp32", mode="train", warmup=1, steps=2,
                   device="cpu").validate()
    env = collect("cpu")
    bench.run(spec, lambda e: None, env, tmp_path)  # the first run imports what the loop needs
    entered: set[str] = set()

    def seen(frame, event, arg):  # noqa: ANN001, ANN202
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("perfconsole.") and name not in entered and not _importing(frame):
                entered.add(name)

    steps = []
    sys.setprofile(seen)
    try:
        bench.run(spec, steps.append, env, tmp_path)
    finally:
        sys.setprofile(None)
    assert any(type(e).__name__ == "SummaryReady" for e in steps)
    assert entered == ROOMS, (sorted(entered - ROOMS), sorted(ROOMS - entered))
    assert len(entered) == 20

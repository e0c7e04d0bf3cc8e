"""A record's loaded profile: its views give what the analyses give over the plain tables, its frames are kept
while the profile holds the same rows, and a table replaced in the profile (ncu's merge) is read afresh."""
from __future__ import annotations

from helpers import ROOT

from perfconsole.core import store
from perfconsole.core.profiling import analyses
from perfconsole.core.profiling.categories import categorize
from perfconsole.core.profiling.attribution import attribute
from perfconsole.core.profiling.loaded import loaded_of
from perfconsole.core.record import Profile

RUN = ROOT / "tests" / "fixtures" / "nsys_perfconsole" / "h200_2.7B_compiled_nsys_run.json"


def test_views_are_the_analyses_of_the_tables():
    tables = store.load(RUN).profile.tables
    p = loaded_of(Profile("nsys", [], tables))
    assert p.category_shares() == analyses.category_shares(tables)
    assert p.phase_shares() == analyses.phase_shares(tables) and p.phase_shares()
    assert p.top_kernels(n=5) == analyses.top_kernels(tables, n=5)
    assert p.top_kernels("forward", n=200) == analyses.top_kernels(tables, "forward", n=200)
    assert p.top_kernels_per_range() == analyses.top_kernels_per_range(tables)
    assert p.forward_check(50.0, 8) == analyses.forward_check(tables, 50.0, 8)
    assert p.attribution(8) == attribute(tables, 8) and p.attribution(8) is not None
    assert p.row_units("cuda") == "kernels" and not p.mostly_aten and not p.replay
    kernels = p.kernels()
    assert len(kernels) == 45 and list(kernels["category"].astype(str)) == [categorize(n) for n in kernels["name"]]


def test_frames_are_kept_until_a_table_is_replaced():
    record = store.load(RUN)
    profile = record.profile
    loaded = loaded_of(profile)
    assert loaded_of(profile) is loaded and loaded.frame("cuda_gpu_kern_sum") is loaded.frame("cuda_gpu_kern_sum")
    before = loaded.category_shares()
    assert loaded.category_shares() is before
    # ncu's tables merged into the run's profile (RunRecord.apply): the same mapping, a kernel table replaced
    one = [{"name": "aten::mm", "total_time_ns": 10, "instances": 1}]
    profile.tables.update({"cuda_gpu_kern_sum": one})
    assert loaded_of(profile) is loaded and len(loaded.kernels()) == 1
    assert [(s.category, s.total_ns) for s in loaded.category_shares()] == [(categorize("aten::mm"), 10)]
    profile.tables = {"cuda_gpu_kern_sum": one}  # a new mapping: a new loaded profile
    assert loaded_of(profile) is not loaded and loaded_of(Profile("import", [], profile.tables)).mostly_aten

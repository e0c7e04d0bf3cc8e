"""scripts/gpu_suite_parts.py: the GPU suite's parts for gpu_suite_split.sh, from the collection and the
recorded durations. The partition on made-up tables, the durations read back from logs and JUnit files, and
the real `-m gpu` collection of this checkout (collecting needs no GPU)."""
from __future__ import annotations

import importlib.util
import itertools
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gpu_suite_parts", ROOT / "scripts" / "gpu_suite_parts.py")
parts_mod = sys.modules.setdefault("gpu_suite_parts", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(parts_mod)
GpuTest, partition, problems = parts_mod.GpuTest, parts_mod.partition, parts_mod.problems


def made_up(n: int, seed: int) -> tuple[list[GpuTest], dict[str, float]]:
    rng = random.Random(seed)
    tests = [GpuTest(f"tests/t{i % 4}.py::test_{i}") for i in range(n)]
    return tests, {t.id: round(rng.uniform(0.5, 90.0), 2) for t in tests}


def optimum(times: list[float]) -> float:
    """The best two-part makespan, trying every subset."""
    total = sum(times)
    best = total
    for mask in itertools.product((0, 1), repeat=len(times)):
        one = sum(t for t, m in zip(times, mask) if m)
        best = min(best, max(one, total - one))
    return best


def test_every_test_is_in_exactly_one_part_and_the_two_gpu_tests_in_both():
    tests, seconds = made_up(20, 1)
    tests += [GpuTest("tests/dp.py::test_a", two_gpus=True), GpuTest("tests/dp.py::test_b[x]", two_gpus=True)]
    parts = partition(tests, seconds)
    assert problems(tests, parts) == []
    assert sorted(sum(parts.values(), [])) == sorted(t.id for t in tests)
    assert parts["both"] == ["tests/dp.py::test_a", "tests/dp.py::test_b[x]"]
    assert parts["gpu0"] and parts["gpu1"]
    order = [t.id for t in tests]
    assert all(p == sorted(p, key=order.index) for p in parts.values())  # the collection's order kept


def test_the_check_names_a_test_in_no_part_in_two_parts_misplaced_or_not_collected():
    tests = [GpuTest("a.py::t1"), GpuTest("a.py::t2"), GpuTest("b.py::t3", two_gpus=True), GpuTest("c.py::t4", group="c.py"),
             GpuTest("c.py::t5", group="c.py")]
    bad = problems(tests, {"gpu0": ["a.py::t1", "c.py::t4", "z.py::t9"], "gpu1": ["a.py::t1", "b.py::t3", "c.py::t5"],
                           "both": []})
    assert bad == ["a.py::t2: in no part", "a.py::t1: in 2 parts (gpu0, gpu1)", "z.py::t9: in part gpu0 but not collected",
                   "b.py::t3: two-GPU test in part gpu1", "group c.py: split over gpu0, gpu1"]
    assert problems(tests, {"gpu0": [], "gpu1": ["a.py::t1", "a.py::t2", "c.py::t4", "c.py::t5"],
                            "both": ["b.py::t3"]}) == []


@pytest.mark.parametrize("seed", range(8))
def test_the_one_gpu_parts_end_within_the_longest_test_of_the_best_split(seed):
    tests, seconds = made_up(13, seed)
    parts = partition(tests, seconds)
    longest = max(seconds[p] for p in ("gpu0", "gpu1") for p in parts[p])
    best = optimum(list(seconds.values()))
    makespan = max(sum(seconds[i] for i in parts[p]) for p in ("gpu0", "gpu1"))
    assert best <= makespan <= best + longest / 2, (makespan, best, longest)


def test_longest_first_on_a_table_where_it_is_known():
    # Longest first, each to the part with less: 3, 3, 2, 2, 2 ends at 7 against the best 6 (3+3 | 2+2+2);
    # 8, 7, 6, 5, 4 at 17 (8+5+4 | 7+6) against 15; 5, 4, 3, 2 at 7 (5+2 | 4+3), the best.
    for times, expected in (([3, 3, 2, 2, 2], 7), ([8, 7, 6, 5, 4], 17), ([5, 4, 3, 2], 7)):
        tests = [GpuTest(f"t.py::test_{i}") for i in range(len(times))]
        parts = partition(tests, {t.id: s for t, s in zip(tests, times)})
        assert max(sum(times[int(i.rsplit("_", 1)[1])] for i in parts[p]) for p in ("gpu0", "gpu1")) == expected


def test_tests_sharing_a_wide_fixture_stay_in_one_part():
    group = [GpuTest(f"tests/h.py::test_{i}", group="tests/h.py") for i in range(3)]
    tests = [*group, *(GpuTest(f"tests/o.py::test_{i}") for i in range(4))]
    seconds = {group[0].id: 200.0, group[1].id: 0.0, group[2].id: 0.0, **{f"tests/o.py::test_{i}": 60.0 for i in range(4)}}
    parts = partition(tests, seconds)
    assert problems(tests, parts) == []
    home = next(p for p in ("gpu0", "gpu1") if group[0].id in parts[p])
    assert [i for i in parts[home] if i.startswith("tests/h.py")] == [t.id for t in group]
    assert sorted(len(parts[p]) for p in ("gpu0", "gpu1")) == [3, 3 + 1]  # 3 x 60 | 200 + 60


def test_tests_that_share_a_gpu_go_to_the_shared_parts_and_the_rest_never_do():
    """A test marked shares_gpu runs in one of the four shared parts, two to a GPU, after the exclusive ones; a
    group goes there only if all its tests are marked; the check names an unmarked test in a shared part."""
    shared = [GpuTest(f"tests/s.py::test_{i}", shares_gpu=True) for i in range(6)]
    mixed = [GpuTest("tests/m.py::test_a", group="tests/m.py", shares_gpu=True), GpuTest("tests/m.py::test_b", group="tests/m.py")]
    alone = [GpuTest(f"tests/x.py::test_{i}") for i in range(2)]
    tests = [*shared, *mixed, *alone]
    seconds = {**{t.id: 40.0 + i for i, t in enumerate(shared)}, **{t.id: 10.0 for t in mixed + alone}}
    parts = partition(tests, seconds)
    assert problems(tests, parts) == []
    assert sorted(sum((parts[p] for p in parts_mod.SHARED), [])) == sorted(t.id for t in shared)
    assert all(parts[p] for p in parts_mod.SHARED)  # six tests over four parts: none left empty
    assert sorted(parts["gpu0"] + parts["gpu1"]) == sorted(t.id for t in mixed + alone)
    est = parts_mod.part_seconds(parts, seconds)
    assert parts_mod.suite_seconds(est) == max(est["gpu0"], est["gpu1"]) + max(est[p] for p in parts_mod.SHARED)
    moved = {**parts, "shared1b": [*parts["shared1b"], "tests/x.py::test_0"],
             "gpu0": [i for i in parts["gpu0"] if i != "tests/x.py::test_0"],
             "gpu1": [i for i in parts["gpu1"] if i != "tests/x.py::test_0"]}
    assert problems(tests, moved) == ["tests/x.py::test_0: not marked shares_gpu, in shared part shared1b"]


def test_a_test_with_no_recorded_time_counts_as_the_median():
    tests = [GpuTest("t.py::a"), GpuTest("t.py::b"), GpuTest("t.py::c"), GpuTest("t.py::new")]
    times, unknown = parts_mod.fill_in(tests, {"t.py::a": 10.0, "t.py::b": 20.0, "t.py::c": 90.0, "gone.py::x": 1.0})
    assert unknown == ["t.py::new"] and times["t.py::new"] == 20.0
    times, unknown = parts_mod.fill_in(tests, {})
    assert len(unknown) == 4 and set(times.values()) == {parts_mod.DEFAULT_SECONDS}
    parts = partition(tests, {})
    assert problems(tests, parts) == [] and sorted(len(parts[p]) for p in ("gpu0", "gpu1")) == [2, 2]


LOG_OLD = """\
============================= slowest 3 durations =============================
50.00s call     tests/a.py::test_slow
20.00s call     tests/a.py::test_mid[x]
1.00s setup    tests/a.py::test_mid[x]
=========================== short test summary info ============================
PASSED tests/a.py::test_slow
PASSED tests/a.py::test_mid[x]
PASSED tests/a.py::test_quick
SKIPPED [1] tests/b.py:3: needs two GPUs
"""
LOG_NEW = """\
============================= slowest 15 durations =============================
40.00s call     tests/a.py::test_slow
0.50s teardown tests/a.py::test_slow

(4 durations < 0.005s hidden.  Use -vv to show these durations.)
=========================== short test summary info ============================
PASSED tests/a.py::test_slow
FAILED tests/a.py::test_tiny - AssertionError: assert 1 == 2
2 passed in 41.00s
"""


def test_durations_from_logs_the_latest_figure_and_a_bound_for_the_unlisted(tmp_path):
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    old.write_text(LOG_OLD)
    new.write_text(LOG_NEW)
    assert parts_mod.from_logs([old, new]) == {"tests/a.py::test_slow": 40.5, "tests/a.py::test_mid[x]": 21.0,
                                               "tests/a.py::test_quick": 3.0, "tests/a.py::test_tiny": 0.0}


def test_junit_times_map_back_to_node_ids(tmp_path):
    """A real pytest's --junitxml for parametrised, class and skipped tests reads back onto its node ids."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "test_t.py").write_text(
        "import time, pytest\n"
        "@pytest.mark.parametrize('n', [1, 'a-b'])\n"
        "def test_p(n): time.sleep(0.2)\n"
        "class TestC:\n    def test_m(self): pass\n"
        "def test_s(): pytest.skip('no')\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", "/dev/null",
                           "--rootdir", str(tmp_path), "--junitxml", str(tmp_path / "junit-x.xml"), "pkg"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = ["pkg/test_t.py::test_p[1]", "pkg/test_t.py::test_p[a-b]", "pkg/test_t.py::TestC::test_m",
           "pkg/test_t.py::test_s"]
    seconds, found = parts_mod.from_junit([tmp_path / "junit-x.xml"], [GpuTest(i) for i in [*ids, "pkg/test_t.py::gone"]])
    assert found == set(ids)
    assert set(seconds) == set(ids[:3]) and seconds[ids[0]] >= 0.2 and seconds[ids[2]] < 0.2


def test_the_durations_command_keeps_old_times_and_fails_on_a_test_that_did_not_run(tmp_path):
    tests = [GpuTest("a.py::t1"), GpuTest("a.py::t2"), GpuTest("a.py::t3")]
    (tmp_path / "collected.json").write_text(json.dumps([t.__dict__ for t in tests]))
    (tmp_path / "junit-gpu0.xml").write_text(
        '<testsuites><testsuite><testcase classname="a" name="t1" time="4.5"/>'
        '<testcase classname="a" name="t2" time="0.01"><skipped message="x"/></testcase></testsuite></testsuites>')
    previous = tmp_path / "prev.json"
    parts_mod.write_durations(previous, {"a.py::t1": 9.0, "a.py::t2": 7.0, "a.py::t3": 8.0, "gone.py::t": 1.0}, "x")
    out = tmp_path / "new.json"
    rc = parts_mod.main(["durations", "--dir", str(tmp_path), "--previous", str(previous), "--out", str(out)])
    assert rc == 1  # a.py::t3 is in no JUnit file
    assert parts_mod.read_durations(out) == {"a.py::t1": 4.5, "a.py::t2": 7.0, "a.py::t3": 8.0}


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "tests").glob("gpu_durations*.json")))
def test_the_committed_durations_are_what_their_source_says(name):
    data = json.loads((ROOT / "tests" / name).read_text())
    assert data["seconds"] and all(v >= 0 for v in data["seconds"].values())
    logs = data["from"].removeprefix("the --durations sections of ")
    if logs != data["from"]:
        assert parts_mod.from_logs([ROOT / p for p in logs.split(", ")]) == data["seconds"]
    else:
        assert re.match(r"the JUnit files of suite-\S+ \(", data["from"]), data["from"]
    # a model's file is named as gpu_suite_split.sh names the model: nvidia-smi's name, lower case, `_` between
    assert re.fullmatch(r"gpu_durations(_[a-z0-9]+(_[a-z0-9]+)*)?\.json", name), name


@pytest.fixture(scope="module")
def gpu_suite() -> list:
    return parts_mod.collect([])  # this checkout's `pytest -m gpu --collect-only`, cross-checked with its list


@pytest.mark.e2e
@pytest.mark.slow
def test_the_parts_cover_the_real_gpu_collection_exactly(gpu_suite):
    seconds = parts_mod.read_durations(ROOT / "tests" / "gpu_durations.json")
    four = parts_mod.Layout(4)
    parts4 = partition(gpu_suite, seconds, four)
    assert problems(gpu_suite, parts4, four) == [] and parts4["four"] and parts4["both0"] + parts4["both1"]
    assert all(i.startswith("tests/core/launch/test_four_gpus.py::") for i in parts4["four"])
    on_two = [t for t in gpu_suite if not t.four_gpus]  # what split collects on two GPUs
    parts = partition(on_two, seconds)
    assert len(on_two) > 30 and problems(on_two, parts) == []
    assert sorted(sum(parts.values(), [])) == sorted(t.id for t in on_two)
    assert parts["both"] and set(parts["both"]) == {t.id for t in on_two if t.two_gpus}  # two_gpus tests, every one
    assert any(i.startswith("tests/core/launch/test_data_parallel_gpu.py::") for i in parts["both"])
    # the chaos test counts every nsys agent on the machine: no other test of the shared parts may start one
    shared = {i for p in parts_mod.SHARED for i in parts[p]}
    assert "tests/tui/test_chaos.py::test_a_console_ended_mid_nsys_run_leaves_no_nsys_agent" in shared
    assert not [i for i in shared if "nsys" in i and "test_chaos" not in i], shared


@pytest.mark.e2e
@pytest.mark.slow
def test_every_gpu_test_that_needs_two_or_four_gpus_is_marked_so(gpu_suite):
    """A test file that skips with fewer than two (four) GPUs holds `two_gpus` (`four_gpus`) tests only, so the
    split runs it on two GPUs (on four)."""
    needs_two = re.compile(r"(visible_gpus\(\)\)|device_count\(\))\s*<\s*2")
    files = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py") if needs_two.search(p.read_text())}
    assert "tests/core/launch/test_data_parallel_gpu.py" in files
    for t in gpu_suite:
        assert t.two_gpus == (t.id.split("::")[0] in files), t
    needs_four = re.compile(r"(visible_gpus\(\)\)|device_count\(\))\s*<\s*4")
    fours = {str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py") if needs_four.search(p.read_text())}
    assert "tests/core/launch/test_four_gpus.py" in fours
    for t in gpu_suite:
        assert t.four_gpus == (t.id.split("::")[0] in fours), t


def test_on_four_gpus_every_part_has_its_gpus_and_the_two_and_four_gpu_tests_their_own_parts():
    layout = parts_mod.Layout(4)
    tests, seconds = made_up(24, 5)
    tests += [GpuTest(f"tests/dp.py::test_{i}", two_gpus=True) for i in range(4)]
    tests += [GpuTest("tests/four.py::test_curve", four_gpus=True)]
    seconds.update({f"tests/dp.py::test_{i}": 40.0 + i for i in range(4)})
    parts = partition(tests, seconds, layout)
    assert problems(tests, parts, layout) == []
    assert layout.parts == ("gpu0", "gpu1", "gpu2", "gpu3", "shared0a", "shared0b", "shared1a", "shared1b",
                            "shared2a", "shared2b", "shared3a", "shared3b", "both0", "both1", "four")
    assert [layout.devices(p) for p in ("gpu2", "shared3b", "both0", "both1", "four")] == ["2", "3", "0,1", "2,3",
                                                                                          "0,1,2,3"]
    assert parts["four"] == ["tests/four.py::test_curve"]
    assert len(parts["both0"]) == len(parts["both1"]) == 2  # longest first: 43 and 40 against 42 and 41
    assert all(parts[g] for g in layout.exclusive)
    est = parts_mod.part_seconds(parts, {**seconds, "tests/four.py::test_curve": 10.0})
    assert parts_mod.suite_seconds(est, layout) == (max(est[p] for p in layout.exclusive)
                                                     + max(est["both0"], est["both1"]) + est["four"])


def test_a_four_gpu_test_has_no_part_on_two_gpus_and_a_misplaced_one_is_named():
    tests = [GpuTest("a.py::t1"), GpuTest("f.py::t4", four_gpus=True)]
    two = partition(tests, {}, parts_mod.TWO)
    assert problems(tests, two) == ["f.py::t4: in no part"]
    four = parts_mod.Layout(4)
    bad = {p: [] for p in four.parts} | {"gpu0": ["a.py::t1"], "both1": ["f.py::t4"]}
    assert problems(tests, bad, four) == ["f.py::t4: four-GPU test in part both1"]

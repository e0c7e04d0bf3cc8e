"""The parts of the GPU suite that scripts/gpu_suite_split.sh runs on a two- or four-GPU machine, derived from
the collection and balanced by the durations the last run recorded.

    python3 scripts/gpu_suite_parts.py split --dir D [--gpus 2|4] [--durations tests/gpu_durations.json] [-- PYTEST_ARGS]
        collects `pytest -m gpu` (PYTEST_ARGS, such as the setup's IGNORES, go with it; on two GPUs without the
        tests marked `four_gpus`) and writes D/collected.json, D/part-NAME.txt for each part of the `Layout`
        (one node id a line) and D/layout.txt (a line a part: its phase, name and CUDA_VISIBLE_DEVICES): the
        tests marked `four_gpus` go to `four`, those marked `two_gpus` to `both` (on four GPUs to `both0` on
        GPUs 0,1 and `both1` on 2,3, side by side); those marked `shares_gpu` (they time nothing and hold little
        GPU memory) to the shared parts, two to a GPU (shared0a and shared0b on GPU 0, ...), run side by side
        after the exclusive parts; the rest to `gpu0`, `gpu1`, ..., each alone on its GPU.
        Within each kind, by longest time first, each to the part with less time so far. Tests that share a
        fixture wider than a test (module, class, package scope) stay in one part (a shared part only where
        all of them are marked). A test with no recorded time counts as the median of the recorded ones on as
        many GPUs.
        Fails where a collected test is not in exactly one part, or nothing is collected.
    python3 scripts/gpu_suite_parts.py durations --dir D [--previous FILE] --out FILE
        reads D/junit-*.xml back into a durations file (a test's setup, call and teardown together; a test
        that was skipped or did not run keeps its time from FILE) and fails where a collected test is in no
        JUnit file (it did not run: its part was cut off).
    python3 scripts/gpu_suite_parts.py seed --out FILE LOG...
        a durations file from pytest logs' `--durations` sections; a later LOG's time for a test wins
        (tests/gpu_durations.json was first made so, from the logs its `from` names).

A durations file is {"from": what measured it, "seconds": {node id: seconds}}.

Loaded into the collecting pytest as a plugin (`-p gpu_suite_parts`), this module writes each collected
test's node id, whether it is marked `two_gpus`, and its group to the file GPU_SUITE_PARTS_COLLECTED names.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path



@dataclass(frozen=True)
class Layout:
    """The parts on a machine of `gpus` GPUs (2 or 4), in the phases gpu_suite_split.sh runs one after the other,
    the parts of a phase side by side: one part alone on each GPU (`gpu<g>`); then two on each GPU (`shared<g>a`,
    `shared<g>b`); then the two-GPU tests, on GPUs 0,1 (`both`) or, on four, on 0,1 and 2,3 (`both0`, `both1`);
    then, on four, the four-GPU tests on all of them (`four`)."""
    gpus: int = 2

    exclusive = property(lambda self: tuple(f"gpu{g}" for g in range(self.gpus)))
    shared = property(lambda self: tuple(f"shared{g}{x}" for g in range(self.gpus) for x in "ab"))
    pairs = property(lambda self: ("both",) if self.gpus < 4 else tuple(f"both{i}" for i in range(self.gpus // 2)))
    fours = property(lambda self: ("four",) if self.gpus >= 4 else ())
    parts = property(lambda self: (*self.exclusive, *self.shared, *self.pairs, *self.fours))

    def phases(self) -> list[tuple[str, ...]]:
        return [p for p in (self.exclusive, self.shared, self.pairs, self.fours) if p]

    def devices(self, part: str) -> str:
        """The part's CUDA_VISIBLE_DEVICES."""
        if part == "four":
            return ",".join(str(g) for g in range(self.gpus))
        if part.startswith("both"):
            i = int(part[4:] or 0)
            return f"{2 * i},{2 * i + 1}"
        return part[len("shared"):-1] if part.startswith("shared") else part[len("gpu"):]


TWO = Layout(2)
EXCLUSIVE = TWO.exclusive  # one pytest process alone on each GPU, side by side
SHARED = TWO.shared  # then two on each GPU (the digit), side by side
PARTS = TWO.parts  # then the two-GPU tests on both
DEFAULT_SECONDS = 30.0  # a test's time where nothing at all is recorded
WIDE_SCOPES = {"class": 0, "module": 0, "package": 1}  # 0: the group is the file, 1: its folder
ENV = "GPU_SUITE_PARTS_COLLECTED"
DURATION_LINE = re.compile(r"^\s*([0-9.]+)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")
SUMMARY_LINE = re.compile(r"^(?:PASSED|FAILED|ERROR|XFAIL|XPASS) (\S+::\S+?)(?: - .*)?$", re.M)


@dataclass(frozen=True)
class GpuTest:
    id: str
    two_gpus: bool = False
    four_gpus: bool = False
    group: str | None = None
    shares_gpu: bool = False  # times nothing, holds little GPU memory: may run beside another such test  # tests of one group share a fixture and run in one process

    @property
    def unit(self) -> str:
        return self.group or self.id


# -- the collection ------------------------------------------------------------------------------------------

def pytest_collection_finish(session) -> None:
    """The plugin side: each collected test, as a JSON line, to the file GPU_SUITE_PARTS_COLLECTED names."""
    path = os.environ.get(ENV)
    if not path:
        return
    with open(path, "w") as out:
        for item in session.items:
            out.write(json.dumps({"id": item.nodeid, "two_gpus": item.get_closest_marker("two_gpus") is not None,
                                  "four_gpus": item.get_closest_marker("four_gpus") is not None,
                                  "group": _group(item),
                                  "shares_gpu": item.get_closest_marker("shares_gpu") is not None}) + "\n")


def _group(item) -> str | None:
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    ups = [WIDE_SCOPES[d.scope] for seq in defs.values() for d in seq if d.scope in WIDE_SCOPES]
    if not ups:
        return None
    path = Path(item.nodeid.split("::")[0])
    return str(path.parent) + "/" if max(ups) else str(path)


def collect(pytest_args: list[str], python: str = sys.executable, marks: str = "gpu") -> list[GpuTest]:
    """The `-m gpu` tests (or `marks`), as `python -m pytest -m gpu --collect-only` finds them from the current
    folder."""
    scripts = str(Path(__file__).resolve().parent)
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as found:
        env = dict(os.environ, **{ENV: found.name})
        env["PYTHONPATH"] = scripts + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        done = subprocess.run([python, "-m", "pytest", "-m", marks, "--collect-only", "-q", "-p", "no:cacheprovider",
                               "-p", "gpu_suite_parts", *pytest_args], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise SystemExit(f"collecting the gpu tests failed (exit {done.returncode}):\n"
                             + (done.stdout + done.stderr)[-3000:])
        tests = [GpuTest(**json.loads(line)) for line in found.read().splitlines() if line.strip()]
    head = done.stdout.split("\n\n")[0]  # the node ids, before the warnings and the count
    listed = [line for line in head.splitlines() if "::" in line]
    if listed != [t.id for t in tests]:
        raise SystemExit("the plugin's tests differ from pytest's own list:\n" + "\n".join(
            sorted(set(listed) ^ {t.id for t in tests})))
    return tests


# -- the parts -----------------------------------------------------------------------------------------------

def fill_in(tests: list[GpuTest], seconds: dict[str, float]) -> tuple[dict[str, float], list[str]]:
    """Each test's time: its recorded one, else the median of the recorded ones among `tests` (else
    DEFAULT_SECONDS). Returns the times and the ids that had none."""
    known = [seconds[t.id] for t in tests if t.id in seconds]
    default = statistics.median(known) if known else DEFAULT_SECONDS
    unknown = [t.id for t in tests if t.id not in seconds]
    return {t.id: float(seconds.get(t.id, default)) for t in tests}, unknown


def _longest_first(units: dict[str, float], names: tuple[str, ...]) -> dict[str, str]:
    load = dict.fromkeys(names, 0.0)
    where: dict[str, str] = {}
    for unit, s in sorted(units.items(), key=lambda kv: (-kv[1], kv[0])):
        part = min(load, key=lambda p: (load[p], p))
        where[unit] = part
        load[part] += s
    return where


def _kind(t: GpuTest) -> str:
    return "four" if t.four_gpus else "two" if t.two_gpus else "one"


def partition(tests: list[GpuTest], seconds: dict[str, float], layout: Layout = TWO) -> dict[str, list[str]]:
    """The two-GPU tests in the layout's pairs (`both`, or `both0` and `both1` on four GPUs) and the four-GPU
    tests in `four`; the one-GPU units (a group, or a test alone) whose tests all share a GPU in the shared
    parts, the rest in the exclusive ones, each kind by longest processing time first; each part keeps the
    collection's order. A four-GPU test on a layout of two is in no part (`problems` says so)."""
    where: dict[str, str] = {}
    for kind, names in (("two", layout.pairs), ("four", layout.fours)):
        mine = [t for t in tests if _kind(t) == kind]
        times, _ = fill_in(mine, seconds)
        units: dict[str, float] = {}
        for t in mine:
            units[t.unit] = units.get(t.unit, 0.0) + times[t.id]
        if names:
            where.update(_longest_first(units, names))
    ones = [t for t in tests if _kind(t) == "one"]
    times, _ = fill_in(ones, seconds)
    units = {}
    exclusive: set[str] = set()
    for t in ones:
        units[t.unit] = units.get(t.unit, 0.0) + times[t.id]
        if not t.shares_gpu:
            exclusive.add(t.unit)
    where.update(_longest_first({u: s for u, s in units.items() if u in exclusive}, layout.exclusive))
    where.update(_longest_first({u: s for u, s in units.items() if u not in exclusive}, layout.shared))
    parts: dict[str, list[str]] = {p: [] for p in layout.parts}
    for t in tests:
        if t.unit in where:
            parts[where[t.unit]].append(t.id)
    return parts


def problems(tests: list[GpuTest], parts: dict[str, list[str]], layout: Layout = TWO) -> list[str]:
    """What is wrong with `parts` for `tests`: a test in none or in two, one not collected, a two- or four-GPU
    test outside its parts or a one-GPU test in them, a group split over two parts."""
    found: dict[str, list[str]] = {}
    for name in layout.parts:
        for i in parts.get(name, []):
            found.setdefault(i, []).append(name)
    out = [f"{i}: in no part" for i in (t.id for t in tests) if i not in found]
    out += [f"{i}: in {len(p)} parts ({', '.join(p)})" for i, p in found.items() if len(p) > 1]
    ids = {t.id for t in tests}
    out += [f"{i}: in part {p[0]} but not collected" for i, p in found.items() if i not in ids]
    out += [f"{t.id}: not marked shares_gpu, in shared part {found[t.id][0]}" for t in tests
            if not t.shares_gpu and found.get(t.id, [""])[0] in layout.shared]
    home = {"one": (*layout.exclusive, *layout.shared), "two": layout.pairs, "four": layout.fours}
    groups: dict[str, set[str]] = {}
    for t in tests:
        if t.id in found:
            if found[t.id][0] not in home[_kind(t)]:
                out.append(f"{t.id}: {_kind(t)}-GPU test in part {found[t.id][0]}")
            if t.group:
                groups.setdefault(t.group, set()).add(found[t.id][0])
    out += [f"group {g}: split over {', '.join(sorted(p))}" for g, p in groups.items() if len(p) > 1]
    return out


def part_seconds(parts: dict[str, list[str]], times: dict[str, float]) -> dict[str, float]:
    return {p: round(sum(times[i] for i in ids), 1) for p, ids in parts.items()}


def suite_seconds(est: dict[str, float], layout: Layout = TWO) -> float:
    """The suite's time by the parts' times: each phase as long as its longest part, one phase after another."""
    return sum(max(est[p] for p in phase) for phase in layout.phases())


# -- durations files -----------------------------------------------------------------------------------------

def read_durations(path: str | Path | None) -> dict[str, float]:
    if not path or not Path(path).exists():
        return {}
    return {k: float(v) for k, v in json.loads(Path(path).read_text())["seconds"].items()}


def write_durations(path: str | Path, seconds: dict[str, float], source: str) -> None:
    data = {"from": source, "seconds": {k: round(seconds[k], 2) for k in sorted(seconds)}}
    Path(path).write_text(json.dumps(data, indent=1) + "\n")


def from_logs(logs: list[str | Path]) -> dict[str, float]:
    """Each test's setup, call and teardown summed from pytest logs' `slowest durations` lines, a later log's
    figure winning. A test that ran (in the `-rA` summary) but is not in its log's list took no longer than
    the shortest listed phase in each of its phases (no time at all where pytest says the rest are under
    0.005 s); that bound, the smallest over the logs, stands only for a test no log lists."""
    listed: dict[str, float] = {}
    bounds: dict[str, float] = {}
    for log in logs:
        text = Path(log).read_text(errors="replace")
        mine: dict[str, float] = {}
        shortest = None
        for line in text.splitlines():
            m = DURATION_LINE.match(line)
            if m:
                mine[m.group(3)] = mine.get(m.group(3), 0.0) + float(m.group(1))
                shortest = float(m.group(1)) if shortest is None else min(shortest, float(m.group(1)))
        listed.update(mine)
        if shortest is None:
            continue
        bound = 0.0 if "durations < 0.005s hidden" in text else 3 * shortest
        for m in SUMMARY_LINE.finditer(text):
            if m.group(1) not in mine:
                bounds[m.group(1)] = min(bound, bounds.get(m.group(1), bound))
    return {**bounds, **listed}


def junit_key(node_id: str) -> tuple[str, str]:
    """The (classname, name) pytest's --junitxml writes for a node id (_pytest.junitxml.mangle_test_address)."""
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def from_junit(files: list[str | Path], tests: list[GpuTest]) -> tuple[dict[str, float], set[str]]:
    """The collected tests the JUnit files hold: the times of those that ran (pytest's `time`: setup, call
    and teardown), and the ids of all of them, skipped ones too (a skip says nothing of a test's time)."""
    ids = {junit_key(t.id): t.id for t in tests}
    seconds: dict[str, float] = {}
    found: set[str] = set()
    for f in files:
        for case in ET.parse(f).getroot().iter("testcase"):
            node = ids.get((case.get("classname", ""), case.get("name", "")))
            if node is not None:
                found.add(node)
                if case.find("skipped") is None:
                    seconds[node] = float(case.get("time") or 0.0)
    return seconds, found


# -- the command line ----------------------------------------------------------------------------------------

def _split(args) -> int:
    layout = Layout(args.gpus)
    # On fewer than four GPUs the four-GPU tests are not collected: they would skip and prove nothing.
    tests = collect(args.pytest_args, marks="gpu" if layout.fours else "gpu and not four_gpus")
    if not tests:
        print("no gpu test collected")
        return 1
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / "collected.json").write_text(json.dumps([t.__dict__ for t in tests], indent=1) + "\n")
    recorded = read_durations(args.durations)
    parts = partition(tests, recorded, layout)
    for name in layout.parts:
        (d / f"part-{name}.txt").write_text("".join(i + "\n" for i in parts[name]))
    # One line a part, in the order the phases run: phase number, part, its CUDA_VISIBLE_DEVICES.
    (d / "layout.txt").write_text("".join(f"{n} {p} {layout.devices(p)}\n"
                                          for n, phase in enumerate(layout.phases(), 1) for p in phase))
    times: dict[str, float] = {}
    unknown: list[str] = []
    for kind in ("one", "two", "four"):
        t, u = fill_in([x for x in tests if _kind(x) == kind], recorded)
        times.update(t)
        unknown += u
    est = part_seconds(parts, times)
    counts = {k: sum(_kind(t) == k for t in tests) for k in ("one", "two", "four")}
    print(f"gpu tests collected: {len(tests)} ({counts['one']} on one GPU, {counts['two']} on two, {counts['four']} "
          f"on four) for {layout.gpus} GPUs; times from {args.durations or 'nothing recorded'}")
    for name in layout.parts:
        print(f"part {name} (GPUs {layout.devices(name)}): {len(parts[name])} tests, {est[name]:.0f} s by the "
              "recorded times")
    print(f"the suite by the recorded times: {suite_seconds(est, layout):.0f} s (each phase as long as its longest "
          "part; tests sharing a GPU run slower than recorded alone)")
    if unknown:
        print(f"{len(unknown)} tests with no recorded time, each counted as the median of those on as "
              "many GPUs:" + "".join(f"\n  {i}" for i in unknown))
    bad = problems(tests, parts, layout)
    print(f"every collected test in exactly one part: {'yes' if not bad else 'NO'}")
    for b in bad:
        print("  " + b)
    return 1 if bad else 0


def _durations(args) -> int:
    d = Path(args.dir)
    tests = [GpuTest(**t) for t in json.loads((d / "collected.json").read_text())]
    timed: dict[str, float] = {}
    found: set[str] = set()
    for f in sorted(d.glob("junit-*.xml")):
        try:
            s, ids = from_junit([f], tests)
        except ET.ParseError as e:
            print(f"{f.name}: unreadable ({e})")
            continue
        timed.update(s)
        found |= ids
    collected = {t.id for t in tests}
    seconds = {k: v for k, v in {**read_durations(args.previous), **timed}.items() if k in collected}
    write_durations(args.out, seconds, f"the JUnit files of {d.name} ({len(timed)} of {len(tests)} tests timed; "
                    f"the skipped and those that did not run keep their times from {args.previous or 'nothing'})")
    missing = [t.id for t in tests if t.id not in found]
    print(f"{len(found)} of {len(tests)} collected gpu tests in the JUnit files, {len(timed)} timed (not skipped); "
          f"durations written to {args.out}")
    for i in missing:
        print(f"  did not run: {i}")
    return 1 if missing else 0


def _seed(args) -> int:
    seconds = from_logs(args.logs)
    write_durations(args.out, seconds, "the --durations sections of " + ", ".join(args.logs))
    print(f"{len(seconds)} tests' durations written to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split", help="collect and write the parts")
    s.add_argument("--dir", required=True)
    s.add_argument("--durations", default="tests/gpu_durations.json")
    s.add_argument("--gpus", type=int, choices=(2, 4), default=2, help="the machine's GPUs the parts are for")
    s.add_argument("pytest_args", nargs="*")
    s.set_defaults(run=_split)
    d = sub.add_parser("durations", help="the JUnit files' times into a durations file")
    d.add_argument("--dir", required=True)
    d.add_argument("--previous")
    d.add_argument("--out", required=True)
    d.set_defaults(run=_durations)
    e = sub.add_parser("seed", help="a durations file from pytest logs")
    e.add_argument("--out", required=True)
    e.add_argument("logs", nargs="+")
    e.set_defaults(run=_seed)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

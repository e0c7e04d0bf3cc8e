"""find_nsys search order, profile_command and export_stats, driven by a stand-in nsys executable.

The stand-in is a small Python script (no shell) that answers `--version` like nsys 2024.5.1 and, for
`stats --report R ... -o PREFIX REP`, writes PREFIX_R.csv from a real fixture, prints nsys's SKIPPED
line, or fails, depending on the report.
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from perfconsole.core.profiling.errors import NsysError, ProfileError
from perfconsole.core.profiling.load import load_profile
from perfconsole.core.profiling.locate import NsysInfo, describe, find_nsys, nsys_version
from perfconsole.core.profiling.nsys_run import EXPORT_REPORTS, export_stats, profile_command
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "nsys"

FAKE = f"""#!{sys.executable}
import shutil, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0")
    sys.exit(0)
assert args[0] == "stats", args
report = args[args.index("--report") + 1]
prefix = args[args.index("-o") + 1]
assert "--format" in args and args[args.index("--format") + 1] == "csv"
sources = {{"cuda_gpu_kern_sum": {str(FIXTURES / "gpa/demo_cuda_gpu_kern_sum.csv")!r},
            "cuda_api_sum": {str(FIXTURES / "moeresearch/AT_ON_CG_ON_cuda_api_sum.csv")!r},
            "nvtx_sum": {str(FIXTURES / "gptqmodel/llama32_1b_layers2_nvtx_sum.csv")!r}}}
if report in sources:
    print(f"Processing [x.sqlite] with [/opt/nsys/reports/{{report}}.py] to [{{prefix}}_{{report}}.csv]... PROCESSED")
    shutil.copy(sources[report], f"{{prefix}}_{{report}}.csv")
elif report == "cuda_gpu_mem_size_sum":
    print(f"Processing [x.sqlite] with [/opt/nsys/reports/{{report}}.py]... ")
    print("SKIPPED: x.sqlite does not contain GPU memory data.")
else:
    print("ERROR: report crashed", file=sys.stderr)
    sys.exit(1)
"""


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_nsys(tmp_path: Path) -> Path:
    return _exe(tmp_path / "bin" / "nsys", FAKE)


def test_version(fake_nsys: Path) -> None:
    assert nsys_version(str(fake_nsys)) == "2024.5.1.113"


def test_search_order(tmp_path: Path, fake_nsys: Path) -> None:
    other = _exe(tmp_path / "env" / "nsys", FAKE.replace("2024.5.1.113", "2025.1.1.1"))
    on_path = _exe(tmp_path / "path" / "nsys", FAKE.replace("2024.5.1.113", "2023.4.1.97"))
    opt_old = _exe(tmp_path / "opt" / "nsight-systems" / "2022.1.1" / "bin" / "nsys", FAKE.replace("2024.5.1.113", "2022.1.1.1"))
    opt_new = _exe(tmp_path / "opt" / "nsight-systems" / "2023.10.1" / "bin" / "nsys", FAKE.replace("2024.5.1.113", "2023.10.1.1"))
    globs = (str(tmp_path / "opt" / "nsight-systems" / "*" / "bin" / "nsys"),)
    env = {"PERFCONSOLE_NSYS": str(other), "PATH": str(on_path.parent)}
    assert find_nsys(str(fake_nsys), env, globs) == NsysInfo(str(fake_nsys), "2024.5.1.113")
    assert find_nsys(None, env, globs) == NsysInfo(str(other), "2025.1.1.1")
    assert find_nsys(None, {"PATH": str(on_path.parent)}, globs).version == "2023.4.1.97"
    found = find_nsys(None, {"PATH": str(tmp_path / "nowhere")}, globs)
    assert found == NsysInfo(str(opt_new), "2023.10.1.1")  # newest install first, 2023.10 > 2022.1
    assert opt_old.exists()
    assert find_nsys(None, {"PATH": str(tmp_path / "nowhere")}, ()) is None
    assert "torch.profiler" in describe(None) and "2023.10.1.1" in describe(found)


def test_explicit_path_that_does_not_work_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(NsysError, match="--nsys .*not an executable"):
        find_nsys(str(tmp_path / "nope"), {"PATH": ""}, ())
    broken = _exe(tmp_path / "broken" / "nsys", f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    with pytest.raises(NsysError, match="exited 3"):
        find_nsys(None, {"PERFCONSOLE_NSYS": str(broken), "PATH": ""}, ())
    assert find_nsys(None, {"PATH": str(broken.parent)}, ()) is None  # a broken copy on PATH is skipped


def test_profile_command_wraps_worker(tmp_path: Path) -> None:
    cmd = profile_command(NsysInfo("/opt/nsys", "2024.5"), ["python", "-m", "w", "--spec", "{}"], tmp_path / "run")
    assert cmd[:2] == ["/opt/nsys", "profile"]
    assert "--trace=cuda,nvtx,cublas" in cmd and "--sample=none" in cmd and "--cpuctxsw=none" in cmd
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert cmd[cmd.index("-o") + 1] == str(tmp_path / "run") and "--force-overwrite=true" in cmd
    assert cmd[-5:] == ["python", "-m", "w", "--spec", "{}"]


def test_export_stats_keeps_going_past_failed_and_skipped_reports(tmp_path: Path, fake_nsys: Path) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"not really a report")
    progress: list[str] = []
    tables, files, warnings = export_stats(NsysInfo(str(fake_nsys), "2024.5.1"), rep, tmp_path / "stats",
                                           progress.append)
    assert set(tables) == {"cuda_gpu_kern_sum", "cuda_api_sum", "nvtx_sum"}
    assert len(tables["cuda_gpu_kern_sum"]) == 238
    assert sorted(Path(f).name for f in files) == ["run_cuda_api_sum.csv", "run_cuda_gpu_kern_sum.csv",
                                                   "run_nvtx_sum.csv"]
    assert len(progress) == len(EXPORT_REPORTS)
    assert any("cuda_gpu_mem_size_sum absent" in w for w in warnings)
    assert any(w.startswith("nsys stats nvtx_kern_sum: exit 1") for w in warnings)


def test_export_stats_with_nothing_readable_raises(tmp_path: Path) -> None:
    always_fails = _exe(tmp_path / "bad" / "nsys", f"#!{sys.executable}\nimport sys\nsys.exit(1)\n")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"x")
    with pytest.raises(NsysError, match="no readable report"):
        export_stats(NsysInfo(str(always_fails), "?"), rep, tmp_path / "out")


def test_load_profile_of_a_report_uses_nsys(tmp_path: Path, fake_nsys: Path) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"x")
    tables, warnings = load_profile(rep, str(fake_nsys))
    assert len(tables["cuda_api_sum"]) == 44
    assert (tmp_path / "run_stats" / "run_cuda_api_sum.csv").is_file()


def test_report_without_nsys_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("PERFCONSOLE_NSYS", raising=False)
    monkeypatch.setattr("perfconsole.core.profiling.locate.INSTALL_GLOBS", ())
    import perfconsole.core.profiling.load as load_mod
    monkeypatch.setattr(load_mod, "find_nsys", lambda explicit=None: find_nsys(explicit, dict(os.environ), ()))
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"x")
    with pytest.raises(ProfileError, match="needs nsys"):
        load_profile(rep)


def test_what_nsys_left_out_is_in_the_record(tmp_path: Path, fake_nsys: Path) -> None:
    # One suite run on an H200 lost nvtx_sum from an nsys run and its record said nothing (the reason went by as a
    # progress line): the record's profile keeps every report nsys skipped or failed, in words.
    from perfconsole.core import events as ev
    from perfconsole.core.launch.nsys import stats_events
    from perfconsole.core.record import RunRecord
    from perfconsole.core.settings import RunSpec

    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"not really a report")
    events = list(stats_events(NsysInfo(str(fake_nsys), "2024.5.1"), tmp_path / "run", tmp_path / "stats", []))
    ready = next(e for e in events if isinstance(e, ev.ProfileReady))
    record = RunRecord(RunSpec(size="tiny", device="cpu").validate())
    record.apply(ev.decode(ready.to_json()))
    said = record.profile.warnings
    assert any("cuda_gpu_mem_size_sum absent (nsys SKIPPED it: x.sqlite does not contain GPU memory data." in w
               for w in said), said
    assert any(w.startswith("nsys stats nvtx_kern_sum: exit 1") for w in said)
    assert RunRecord.from_dict(record.to_dict()).profile.warnings == said

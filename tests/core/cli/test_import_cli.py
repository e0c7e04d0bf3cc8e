"""`perfconsole import`: --json schema, --save as a run record, one-line errors with exit code 2."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from perfconsole.core import store
from perfconsole.core.cli.main import main
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "nsys"


def test_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(FIXTURES / "moeresearch"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"tables", "categories", "warnings"}
    assert {k: len(v) for k, v in doc["tables"].items()} == {"cuda_gpu_kern_sum": 88, "cuda_api_sum": 44}
    assert doc["categories"][0] == {"category": "matmul", "total_ns": doc["categories"][0]["total_ns"],
                                    "share": doc["categories"][0]["share"]}
    assert abs(sum(c["share"] for c in doc["categories"]) - 1) < 1e-9
    assert len(doc["warnings"]) == 1 and "second cuda_api_sum" in doc["warnings"][0]


def test_save_makes_a_run_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "imported.json"
    assert main(["import", str(FIXTURES / "gptqmodel"), "--save", str(out)]) == 0
    captured = capsys.readouterr()
    assert "NVTX ranges" in captured.out and "saved" in captured.err
    record = store.load(out)
    assert record.status == "imported" and record.steps == []
    assert record.profile.profiler == "import"
    assert len(record.profile.tables["nvtx_sum"]) == 56
    assert record.profile.tables["osrt_sum"][0]["total_time_ns"] == 24855615436175


def test_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "k_cuda_gpu_kern_sum.csv"
    lines = (FIXTURES / "gpa" / "demo_cuda_gpu_kern_sum.csv").read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1], lines[2].replace(",", ";")]) + "\n")
    assert main(["import", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:3:" in err and "Traceback" not in err
    assert main(["import", str(tmp_path / "none")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_partial_directory_loads_and_warns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FIXTURES / "gpa" / "demo_cuda_gpu_mem_time_sum.csv", tmp_path)
    (tmp_path / "x_nvtx_sum.csv").write_text("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),"
                                             "Max (ns),StdDev (ns),Style,Range\n1.0,oops\n")
    assert main(["import", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["tables"]) == ["cuda_gpu_mem_time_sum"] and doc["categories"] == []
    assert doc["warnings"][0].startswith(f"{tmp_path / 'x_nvtx_sum.csv'}:2: ")


def test_a_cpu_torch_profile_s_rows_are_called_cpu_ops_and_an_nsys_table_s_gpu_kernels(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    cpu_run = Path(__file__).resolve().parents[3] / "snapshots" / "tiny-cpu-train-torch-profile.json"
    assert main(["import", str(cpu_run)]) == 0
    titles = [line for line in capsys.readouterr().out.splitlines() if "(top " in line or "by category" in line]
    assert "CPU ops (top 20 of" in titles[0] and "CPU op time by category" in titles[1], titles
    assert main(["import", str(FIXTURES / "gpa" / "demo_cuda_gpu_kern_sum.csv")]) == 0
    titles = [line for line in capsys.readouterr().out.splitlines() if "(top " in line or "by category" in line]
    assert "GPU kernels (top 20 of" in titles[0] and "Kernel time by category" in titles[1], titles


def test_a_compressed_torch_trace_imports_as_the_plain_one_and_its_record_opens_in_the_timeline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    gz = ALL_FIXTURES / "torch_traces" / "h200_llama1B_bf16w_cudagraphs_3steps.json.gz"
    plain = tmp_path / "torch_trace.json"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    assert main(["import", str(plain), "--save", str(tmp_path / "plain.json")]) == 0
    assert main(["import", str(gz), "--save", str(tmp_path / "gz.json")]) == 0
    a, b = store.load(tmp_path / "plain.json"), store.load(tmp_path / "gz.json")
    assert a.profile.tables == b.profile.tables and a.profile.tables["cuda_gpu_kern_sum"]
    capsys.readouterr()
    assert main(["timeline", str(tmp_path / "gz.json"), "--width", "80", "--step", "2"]) == 0
    assert "step 2 of 3" in capsys.readouterr().out


@pytest.mark.parametrize("content, says", [(b"xx", "cannot read as gzip"),
                                           (None, "holds no torch profiler trace")])
def test_a_gzip_file_that_is_no_trace_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         content: bytes | None, says: str) -> None:
    import gzip

    path = tmp_path / "profile.json.gz"
    path.write_bytes(content if content is not None else gzip.compress(b"name,total\n"))
    assert main(["import", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err

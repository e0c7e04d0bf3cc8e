"""One document: what --json prints is what --save writes, for run, sweep and attention; export and
import read it from a file or from stdin ("-"), and read the older `run --json` document too."""
import json

import pytest
from helpers import pc, ROOT

SNAPSHOTS = ROOT / "snapshots"
NSYS_CSV = ROOT / "tests" / "fixtures" / "nsys" / "gpa" / "demo_cuda_gpu_kern_sum.csv"

GRIDS = {
    "sweep": ["sweep", "--sizes", "tiny", "--ctx", "16", "--mode", "fwd", "--warmup", "0", "--steps", "2",
              "--batch", "2", "--device", "cpu", "--start-ahead", "1"],
    "attention": ["attention", "--d", "8", "--seq", "16", "--batch", "2", "--impl", "sdpa", "--warmup", "1",
                  "--iters", "2", "--device", "cpu", "--start-ahead", "1"],
}


@pytest.mark.parametrize("kind", sorted(GRIDS))
def test_a_grid_prints_its_snapshot_and_it_exports_from_stdin(tmp_path, kind):
    save = tmp_path / f"{kind}.json"
    out = pc(*GRIDS[kind], "--json", "--save", str(save))
    assert out.returncode == 0, out.stderr
    assert out.stdout == save.read_text()
    doc = json.loads(out.stdout)
    assert doc["schema"] == 1 and doc["kind"] == kind and doc["data"]["status"] == "ok"
    md = pc("export", "-", "--format", "md", input=out.stdout)
    assert md.returncode == 0, md.stderr
    assert md.stdout == pc("export", str(save), "--format", "md").stdout


def test_an_older_run_json_document_exports_like_the_run(tmp_path):
    snapshot = SNAPSHOTS / "tiny-cpu-train-fp32.json"
    old = tmp_path / "old.json"  # the document `run --json` printed before (export --format json still does)
    old.write_text(pc("export", str(snapshot), "--format", "json").stdout)
    doc = json.loads(old.read_text())
    assert {"status", "spec", "steps", "summary"} <= doc.keys() and "data" not in doc
    for fmt in ("md", "csv", "json"):
        again = pc("export", str(old), "--format", fmt)
        assert again.returncode == 0, again.stderr
        assert again.stdout == pc("export", str(snapshot), "--format", fmt).stdout
    piped = pc("export", "-", "--format", "md", input=old.read_text())
    assert piped.returncode == 0 and "| tiny |" in piped.stdout


def test_import_takes_a_profiled_runs_snapshot_from_a_file_or_stdin():
    snapshot = SNAPSHOTS / "tiny-cpu-train-torch-profile.json"
    tables = json.loads(snapshot.read_text())["data"]["profile"]["tables"]
    for args, kw in (([str(snapshot)], {}), (["-"], {"input": snapshot.read_text()})):
        out = pc("import", *args, "--json", **kw)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["tables"] == tables


def test_import_reads_nsys_csv_text_from_stdin(tmp_path):
    out = pc("import", "-", "--json", "--save", str(tmp_path / "i.json"), input=NSYS_CSV.read_text())
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["tables"]["cuda_gpu_kern_sum"]
    assert rows and all(r["total_time_ns"] > 0 for r in rows)
    md = pc("export", str(tmp_path / "i.json"))
    assert md.returncode == 0 and "import stdin" in md.stdout


def test_stdin_that_is_not_a_profile_names_stdin():
    out = pc("import", "-", input="hello\n")
    assert out.returncode == 2 and out.stderr.startswith("perfconsole: error: <stdin>")
    assert "perfconsole-stdin-" not in out.stderr

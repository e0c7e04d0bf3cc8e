"""What perfconsole makes of every real profiler fixture: the tables, the warnings, the analyses, and the
`perfconsole import` output (text and --json), recorded as goldens by the row-wise reader that came before
the DataFrame one (`python tests/core/profiling/profile_goldens.py --write`, run at that commit).

test_equivalence.py reads every fixture again with the current code and compares it to the goldens, so
a change in how the tables are read or analysed that changes a value, a row's order, a column or a
warning shows up as a failing fixture. Besides each file and each fixture folder, every CSV fixture is
also read as a captured `nsys stats` console log (the NOTICE and Processing lines nsys prints before
it), and all of them as one log, so the line-scanning path that finds tables in a log is held too.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures"
GOLDENS = Path(__file__).resolve().parent / "goldens" / "profile_goldens.json.gz"
NSYS_DIRS = ("nsys/gpa", "nsys/gptqmodel", "nsys/moeresearch", "nsys_perfconsole")
SNAPSHOTS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "snapshots").glob("*.json")) + [
    "tests/fixtures/nsys_perfconsole/h200_2.7B_compiled_nsys_run.json"]
ROOT_MARK = "<fixtures>"


def fixture_files() -> list[str]:
    """Every real profiler output under tests/fixtures, relative to it."""
    files = []
    for d in NSYS_DIRS:
        files += sorted(p.relative_to(FIXTURES).as_posix() for p in (FIXTURES / d).iterdir()
                        if p.suffix in (".csv", ".txt") and p.name != "SOURCE.txt")
    files += ["nvprof/llmc_train_gpt2cu_nvtx.log"]
    files += sorted(p.relative_to(FIXTURES).as_posix() for p in (FIXTURES / "torch_traces").glob("*.json.gz"))
    return files


def as_log(rel: str) -> str:
    """A CSV fixture as `nsys stats --format csv` prints it without -o (FORMATS.md §6)."""
    report = Path(rel).stem.rsplit("_", 3)
    script = "_".join(report[-3:]) if len(report) > 1 else report[0]
    return ("\nNOTICE: Existing SQLite export found: /tmp/x.sqlite\n"
            "        It is assumed file was previously exported from: /tmp/x.nsys-rep\n"
            "        Consider using --force-export=true if needed.\n\n"
            f"Processing [/tmp/x.sqlite] with [/opt/nsys/host-linux-x64/reports/{script}.py]... \n"
            + (FIXTURES / rel).read_text(encoding="utf-8"))


@contextlib.contextmanager
def _plain_stdout() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    saved = {k: os.environ.pop(k) for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE") if k in os.environ}
    old = sys.stdout
    sys.stdout = buf
    try:
        yield buf
    finally:
        sys.stdout = old
        os.environ.update(saved)


def _cli(args: list[str]) -> tuple[int, str]:
    from perfconsole.core.cli.main import main

    with _plain_stdout() as buf:
        rc = main(args)
    return rc, buf.getvalue()


def _rows(rows: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in rows]


def analyses(tables: Any) -> dict[str, Any]:
    from perfconsole.core.profiling import analyses as c

    out: dict[str, Any] = {
        "category_shares": [s.to_dict() for s in c.category_shares(tables)],
        "phase_shares": [p.to_dict() for p in c.phase_shares(tables)],
        "top_kernels": c.top_kernels(tables, n=20).to_dict(),
        "top_kernels_per_range": [t.to_dict() for t in c.top_kernels_per_range(tables)],
    }
    sm = c.softmax_vs_matmuls(tables)
    out["softmax_vs_matmuls"] = sm.to_dict() if sm else None
    fc = c.forward_check(tables, 10.0)
    out["forward_check"] = fc.to_dict() if fc else None
    return out


def _case_from_path(path: Path, shown: str) -> dict[str, Any]:
    from perfconsole.core.profiling.errors import ProfileError
    from perfconsole.core.profiling.load import load_profile

    try:
        tables, warnings = load_profile(path)
    except ProfileError as exc:
        return {"error": str(exc).replace(str(path), shown)}
    return {"tables": {k: _rows(v) for k, v in tables.items()},
            "warnings": [w.replace(str(path), shown) for w in warnings],
            "analyses": analyses(tables)}


def _with_cli(case: dict[str, Any], path: Path, shown: str) -> dict[str, Any]:
    rc, text = _cli(["import", str(path)])
    case["cli_text"] = [rc, text.replace(str(path), shown)]
    rc, text = _cli(["import", str(path), "--json"])
    text = text.replace(json.dumps(str(path))[1:-1], shown)
    case["cli_json"] = [rc, json.loads(text) if rc == 0 else None]
    case["cli_json_text"] = text  # not stored: the test holds it to json.dumps(golden, indent=1)
    return case


def cases(tmp: Path) -> dict[str, Callable[[], dict[str, Any]]]:
    """Case name -> what computes it with the code at hand (files it needs are written under `tmp`)."""
    out: dict[str, Callable[[], dict[str, Any]]] = {}
    for rel in fixture_files():
        out[rel] = lambda rel=rel: _fixture_case(rel, tmp)
        if rel.endswith(".csv"):
            out[f"{rel} as a log"] = lambda rel=rel: _text_case(as_log(rel), tmp / "capture.txt")
    every = "".join(as_log(r) for r in fixture_files() if r.endswith(".csv"))
    out["every csv fixture as one log"] = lambda: _text_case(every, tmp / "every.txt")
    for d in NSYS_DIRS:
        shown = f"{ROOT_MARK}/{d}"
        out[f"{d}/"] = lambda d=d, shown=shown: _with_cli(_case_from_path(FIXTURES / d, shown), FIXTURES / d, shown)
    from perfconsole.core import store

    for rel in SNAPSHOTS:  # stored tables (rows from JSON) through the analyses and the CLI
        profile = getattr(store.load(REPO / rel), "profile", None)
        if profile is not None and profile.tables:
            out[rel] = lambda rel=rel: _snapshot_case(rel)
    return out


def _fixture_case(rel: str, tmp: Path) -> dict[str, Any]:
    path = FIXTURES / rel
    if rel.endswith(".gz"):  # the reader takes the trace as torch writes it, uncompressed
        path = tmp / Path(rel).name.removesuffix(".gz")
        path.write_bytes(gzip.decompress((FIXTURES / rel).read_bytes()))
    shown = f"{ROOT_MARK}/{rel}"
    return _with_cli(_case_from_path(path, shown), path, shown)


def _text_case(text: str, path: Path) -> dict[str, Any]:
    path.write_text(text, encoding="utf-8")
    return _case_from_path(path, "<log>")


def _snapshot_case(rel: str) -> dict[str, Any]:
    from perfconsole.core import store

    profile = store.load(REPO / rel).profile
    return _with_cli({"analyses": analyses(profile.tables)}, REPO / rel, f"<repo>/{rel}")


def compute() -> dict[str, Any]:
    """Case name -> what the code at hand makes of it."""
    with tempfile.TemporaryDirectory(prefix="perfconsole-goldens-") as tmp:
        return {name: case() for name, case in cases(Path(tmp)).items()}


def load_goldens() -> dict[str, Any]:
    return json.loads(gzip.decompress(GOLDENS.read_bytes()))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/core/profiling/profile_goldens.py --write")
    GOLDENS.parent.mkdir(exist_ok=True)
    done = compute()
    for case in done.values():
        case.pop("cli_json_text", None)
    data = json.dumps(done, indent=1).encode()
    GOLDENS.write_bytes(gzip.compress(data, mtime=0))
    print(f"{GOLDENS}: {len(json.loads(data))} cases, {len(data)} bytes of JSON")

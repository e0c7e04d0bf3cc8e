"""Every figure the documentation states from a measurement is the latest its results page holds.

What is read: README.md and docs/*.md, and the index of the results pages (docs/results/README.md); the rule is
in docs_claims.py's docstring, the generated blocks in docs_generated.py's. In short: a figure is either made
from its results record by a generator (a block the test makes again and compares), or cites the page that
measured it and is written in that page's current part (not a superseded page or section, and only the newest
section of a page that logs one measurement again and again); the index's rows say what their pages say.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_claims import COMMIT, current, figures, index_problems, problems, series_order
from docs_generated import RecordError, documents, made, prefix_for
from helpers import ROOT

RESULTS = ROOT / "docs" / "results"


def doc_problems(doc: Path, results: Path) -> list[str]:
    """What a doc states that its results pages do not back, its generated blocks that differ from what their
    records make now among them."""
    text = doc.read_text()
    name = str(doc.relative_to(results.parents[1]))
    found = problems(text, name, results)
    try:
        fresh = made(text, results, prefix_for(doc, results))
    except RecordError as exc:
        return [*found, f"{name}: {exc}"]
    if fresh != text:
        old, new = ([line for line in t.splitlines() if line not in o.splitlines()] for t, o in
                    ((text, fresh), (fresh, text)))
        found.append(f"{name}: a generated block is not what its record makes now "
                     f"(python tests/docs/docs_generated.py): {old} -> {new}")
    return found


# --- the matcher on sentences made up for it --------------------------------------------------------

@pytest.fixture
def results(tmp_path):
    (tmp_path / "page.md").write_text("| ddp default | 210.30 | 212.4 | -1.0% |\nefficiency 86.1 % and 87.9 %, "
                                      "4,244.4 GB/s, 1.03 %, ratio 1.79\n")
    return tmp_path


def test_a_sentence_citing_its_figures_holds(results):
    text = ("DDP's defaults take 210.3 ms, \u22121.0 % against the script; 86.1\u201387.9 % at best "
            "([p](docs/results/page.md)).")
    assert figures(text) == ["210.3", "1.0", "86.1", "87.9"]
    assert problems(text, "README.md", results) == []


def test_a_wrong_figure_is_flagged(results):
    (results / "llama.md").write_text("run / independent = 129.06 / 127.74 = 1.010, that is 1.03 %\n")
    text = "`run` agrees within 1.0 % (129.06 ms, 1.80x) ([a](results/llama.md))."
    flagged = problems(text, "docs/models.md", results)
    assert [f.split(": ")[1].split(" is")[0] for f in flagged] == ["1.0", "1.80"]
    # A range is two figures; a rounded figure is not the one written ("4,244" is not "4,244.4").
    assert [f.split(": ")[1] for f in problems("Peaks 4,244.4-4,252 GB/s (`page.md`).", "R", results)] == [
        "4252 is not in the current part of page.md"]
    assert len(problems("Peaks 4,244 GB/s (`page.md`).", "R", results)) == 1


def test_a_table_row_is_held_to_the_paragraph_above_its_table(results):
    text = ("Measured on an H200 ([p](results/page.md)):\n\n| a | b |\n| --- | --: |\n"
            "| eager | 212.4 ms |\n| x | 213 ms |\n")
    assert [p.split(": ")[1] for p in problems(text, "docs/x.md", results)] == [
        "213 is not in the current part of page.md"]


def test_a_gpu_figure_without_a_source_and_a_missing_file_are_flagged(results):
    assert problems("On an H200 the step gave 182-205 ms.", "R", results)
    assert problems("It took 3 ms ([gone](docs/results/gone.md)).", "R", results) == [
        "R:1: cites docs/results/gone.md, which does not exist"]
    # Figures that are not measurements on a GPU, and counts of GPUs, are left alone.
    assert problems("NVML is sampled at 10 Hz; a job on 2x H100 has 2 ranks.", "R", results) == []


def test_a_superseded_page_backs_no_figure(results):
    (results / "old.md").write_text("> Superseded by page.md: measured before the fix.\n\n| x | 193.1 ms |\n")
    assert len(problems("The step took 193.1 ms ([old](docs/results/old.md)).", "R", results)) == 1
    assert problems("Its history: [old](docs/results/old.md), predating the fix.", "R", results) == []


def test_a_superseded_section_backs_no_figure_but_the_rest_of_its_page_does(results):
    (results / "mixed.md").write_text(
        "# Page\n\n## Now\n\nforward 48.95 ms\n\n## Before the fix (superseded by the section above)\n\n"
        "forward 52.72 ms\n\n### Its table\n\n| x | 61.5 ms |\n\n## Later\n\n> Superseded by now.md\n\n70.2 ms\n")
    assert problems("Forward 48.95 ms ([m](results/mixed.md)).", "R", results) == []
    for stale in ("52.72", "61.5", "70.2"):
        assert problems(f"Forward {stale} ms ([m](results/mixed.md)).", "R", results), stale


def test_a_nested_item_takes_its_parent_s_citation(results):
    text = "- On 2x H100 ([p](docs/results/page.md)):\n  - defaults 210.3 ms\n  - best 88.0 %\n- other 5 ms\n"
    assert [p.split(": ")[1] for p in problems(text, "R", results)] == ["88.0 is not in the current part of page.md"]


# --- a whole docs tree, made up: a superseded figure and an unsupported one fail -------------------------

SERIES = """# The suite, call by call

Device: two GPUs.
Commit: `{newest}` (the newest call).
Series: newest first.

## A second call, at `{newest}`: {result}

The headline 180.14 ms.

## The first call, at `09dc34f`: 39 passed, 1 failed, in 542 s

The headline 150.20 ms.
"""


def _tree(root: Path, doc: str, newest: str = "7260d86", result: str = "41 passed, 0 failed, in 395 s") -> Path:
    results = root / "docs" / "results"
    results.mkdir(parents=True)
    (results / "gpu_suite_2xh200.md").write_text(SERIES.format(newest=newest, result=result))
    (results / "README.md").write_text(
        "| page | what | device | commit, date | status |\n| --- | --- | --- | --- | --- |\n"
        f"| [gpu_suite_2xh200.md](gpu_suite_2xh200.md) | the suite: {result} | 2x H200 | {newest} | current |\n")
    (root / "docs" / "measuring.md").write_text(doc)
    return root / "docs" / "measuring.md"


BLOCK = "<!-- generated: gpu-suite (tests/docs/docs_generated.py) -->\n{}\n<!-- /generated -->\n"


def test_a_figure_from_a_call_a_later_one_superseded_fails(tmp_path):
    doc = _tree(tmp_path, "The suite's headline test read 150.20 ms ([s](results/gpu_suite_2xh200.md)).\n")
    assert [p.split(": ")[1] for p in doc_problems(doc, doc.parent / "results")] == [
        "150.20 is not in the current part of gpu_suite_2xh200.md"]
    doc.write_text("The suite's headline test read 180.14 ms ([s](results/gpu_suite_2xh200.md)).\n")
    assert doc_problems(doc, doc.parent / "results") == []
    # The commit a measurement ran at is held to the current part too, and so is each number of a list.
    doc.write_text("The last call, at `09dc34f`, read 180.14, 150.20 and 180.14 ms "
                   "([s](results/gpu_suite_2xh200.md)).\n")
    assert [p.split(": ")[1] for p in doc_problems(doc, doc.parent / "results")] == [
        "150.20 is not in the current part of gpu_suite_2xh200.md",
        "commit 09dc34f is not in the current part of gpu_suite_2xh200.md"]


def test_an_unsupported_figure_fails(tmp_path):
    doc = _tree(tmp_path, "On an H200 the suite took 401 s.\n\nIt took 412 s ([s](results/gpu_suite_2xh200.md)).\n")
    assert [p.split(": ")[1] for p in doc_problems(doc, doc.parent / "results")] == [
        "figures on a GPU with no results file cited", "412 is not in the current part of gpu_suite_2xh200.md"]


def test_a_generated_block_fails_once_a_newer_call_is_logged(tmp_path):
    doc = _tree(tmp_path, "Intro.\n\n" + BLOCK.format("(not made yet)"))
    results = doc.parent / "results"
    assert any("generated block" in p for p in doc_problems(doc, results))
    doc.write_text(made(doc.read_text(), results, prefix_for(doc, results)))
    assert doc_problems(doc, results) == []
    assert "at `7260d86` on two GPUs: 41 passed, 0 failed, in 395 s" in doc.read_text()
    page = results / "gpu_suite_2xh200.md"
    page.write_text(page.read_text().replace("Series: newest first.\n", "Series: newest first.\n\n"
                                             "## A third call, at `a1b2c3d`: 40 passed, 1 failed, in 410 s\n"))
    assert any("generated block" in p for p in doc_problems(doc, results))
    # A page whose newest record is not in the shape the generator reads says so, and names the page.
    page.write_text(page.read_text().replace("## A third call, at `a1b2c3d`:", "## A third call:"))
    assert [p for p in doc_problems(doc, results) if "heading does not read" in p]


def test_the_index_rows_say_what_their_pages_say(tmp_path):
    results = _tree(tmp_path, "Intro.\n").parent / "results"
    assert index_problems(results) == []
    index = results / "README.md"
    rows = index.read_text()
    # A status the page contradicts; a figure of an older call and a commit the current part does not name.
    index.write_text(rows.replace("current |", "superseded by x.md |"))
    assert index_problems(results) == [
        "gpu_suite_2xh200.md: the index says 'superseded by x.md', the page's first line does not begin "
        "'> Superseded by'"]
    index.write_text(rows.replace("41 passed, 0 failed, in 395 s |", "39 passed, 1 failed, in 542 s |")
                     .replace("| 7260d86 |", "| 09dc34f |"))
    assert sorted(index_problems(results)) == sorted([
        "gpu_suite_2xh200.md: the index's 542 is not in the page's current part: the suite: 39 passed, 1 failed, "
        "in 542 s", "gpu_suite_2xh200.md: the index's commit 09dc34f is not in the page's current part"])
    page = results / "gpu_suite_2xh200.md"
    page.write_text(page.read_text().replace("## The first call", "## The first call (superseded by the second)"))
    index.write_text(rows)
    assert index_problems(results) == [
        "gpu_suite_2xh200.md: the index says 'current', but sections of the page are superseded"]


# --- the documents -------------------------------------------------------------------------------

@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_is_its_page_s_latest_or_made_from_it(doc):
    found = doc_problems(doc, RESULTS)
    assert not found, f"{len(found)} figure(s) not backed by the current part of the page cited:\n" + "\n".join(found)


def test_the_index_says_what_its_pages_say():
    found = index_problems(RESULTS)
    assert not found, "\n".join(found)


def test_every_results_page_names_its_device_and_commit():
    missing = []
    for page in sorted(RESULTS.glob("*.md")):
        if page.name == "README.md":
            continue
        text = page.read_text()
        if not re.search(r"(?im)^[-*>\s]*devices?\b[^:\n]*:", text):
            missing.append(f"{page.name}: no Device: line")
        line = re.search(r"(?im)^[-*>\s]*commits?\b[^:\n]*:.*\b[0-9a-f]{7,40}\b.*", text)
        if not line:
            missing.append(f"{page.name}: no Commit: line with a commit id")
        elif series_order(text) and not any(c in current(text) for c in COMMIT.findall(line.group(0))):
            missing.append(f"{page.name}: its Commit: line names no commit of its newest section")
    assert not missing, "\n".join(missing)


def test_the_results_index_lists_every_page():
    index = RESULTS / "README.md"
    assert index.is_file(), "docs/results/README.md, the index of the results pages, is missing"
    listed = set(re.findall(r"\]\(([^)#]+)", index.read_text()))
    pages = {p.name for p in RESULTS.glob("*.md")} - {"README.md"}
    assert not pages - listed, f"not in docs/results/README.md: {sorted(pages - listed)}"


def test_the_readme_is_short_and_keeps_its_two_commands():
    """README.md stays a two-minute read, and its two set-up commands are the ones users and CI run."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    setup = "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e '.[dev]' && "
    console = setup + ".venv/bin/perfconsole --start"
    tests = setup + ".venv/bin/python -m pytest -n 3 --dist loadfile"
    assert f"    {console}\n" in readme and f"    {tests}\n" in readme
    assert (ROOT / ".ci" / "run").read_text().rstrip().splitlines()[-1] == tests

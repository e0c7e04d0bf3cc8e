"""Every figure the documentation states from a measurement is in the results file it cites.

What is read: README.md and docs/*.md (not the results pages themselves, which are the evidence).

The rule, kept simple on purpose:

- **Units.** Each table row is one unit. Any other text is cut into paragraphs and list items, each
  joined into one line, and those into sentences: a sentence ends at ".", "!" or "?" followed by
  white space and a capital letter, a backtick, "[", "(" or "*". Headings and code blocks (fenced or
  indented four spaces outside a list) are skipped.
- **Citations.** A unit cites a results file by a Markdown link into docs/results/ (`docs/results/X`
  from the README, `results/X` from docs/), by a path `docs/results/X` or `results/X` written out, or
  by a file name in backticks that exists in docs/results/. A cited folder stands for every file in it.
  A sentence that cites nothing is held to the files its paragraph or list item cites, or else the
  list item it is nested under; a table row that cites nothing to those of the paragraph just above
  its table.
- **Figures.** A number with a unit: `%`, `x` written onto the number (`1.79x`; not `2x H100`), `ms`,
  `s`, `min`, `minutes`, `MiB`, `GiB`, `MB`, `GB`, `GB/s`, `TFLOP/s`, `GFLOP/s`, `TFLOP`. A range
  (`86.1-87.9 %`, `4,244-4,252 GB/s`) is two figures, each of which must be there.
- **Matching.** Thousands separators are dropped, a Unicode minus or dash reads as "-", and the sign is
  not compared. The number must appear in at least one cited file as written, as a whole number (not
  inside a longer one: `1.0` is not in `1.03`); zeros after it are allowed (`210.3` matches `210.30`).
  The unit is not compared, since tables carry theirs in the header.
- **Superseded pages.** A page whose first line begins `> Superseded by` backs no figure: a sentence
  whose figures rest only on such pages is flagged (it may still cite one for its history).
- **Measurements without a source.** A sentence that names an H100 or H200 and states a figure must
  cite a results file (itself or through its paragraph).
- **Results pages** (docs/results/*.md, but the index) each have a `Device:` line and a `Commit:` line
  with a commit id, and the index docs/results/README.md lists every page.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import ROOT

RESULTS = ROOT / "docs" / "results"

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_UNIT = (r"(?:x(?![\w/])(?!\s+H[12]00)(?!\s+GPU)|\s?%|\s(?:ms|s|min|minutes|MiB|GiB|MB|GB|GB/s|TFLOP/s|"
         r"GFLOP/s|TFLOP)(?![\w/]))")
# A figure, or a range of two: "86.1-87.9 %", "4,244-4,252 GB/s", "0.81x-1.20x".
_FIGURE = re.compile(rf"(?<![\w.])({_NUM})(?:{_UNIT}?\s?(?:-|to)\s?({_NUM}))?{_UNIT}")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PATH = re.compile(r"(?:docs/)?results/[\w.\-/]++(?![<{*$])")
_TICKED = re.compile(r"`([^`\s]+)`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\[(*])")
_DEVICE = re.compile(r"\bH[12]00\b")


def normalise(text: str) -> str:
    """Unicode minus and dashes as '-', no thousands separators, no space before '%'."""
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("\u2014", "-")
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return re.sub(r"(?<=\d) %", "%", text)


def figures(text: str) -> list[str]:
    """The numbers of every figure in a sentence, signs dropped, ranges split in two."""
    out: list[str] = []
    for m in _FIGURE.finditer(normalise(text)):
        out.extend(n for n in m.groups() if n)
    return out


def holds(number: str, evidence: str) -> bool:
    """Whether `number` is written in the (normalised) evidence as a whole number."""
    tail = r"0*" if "." in number else r"(?:\.0+)?"
    return re.search(rf"(?<![\d.]){re.escape(number)}{tail}(?![\d])(?!\.\d)", evidence) is not None


@dataclass
class Unit:
    source: str  # "README.md:12"
    text: str
    cites: list[str] = field(default_factory=list)  # paths relative to docs/results/, as written


def _cited(text: str, results: Path) -> list[str]:
    """The results files a piece of Markdown cites, relative to the results folder."""
    names: list[str] = []
    for target in _LINK.findall(text) + _PATH.findall(text):
        target = target.split("#")[0]
        if "results/" in target:
            names.append(target.split("results/", 1)[1].rstrip(".,;:)"))
    for ticked in _TICKED.findall(text):
        ticked = ticked.split("#")[0]
        if "results/" not in ticked and "/" not in ticked.rstrip("/") and ticked.strip("/") and \
                (results / ticked).exists():
            names.append(ticked)
    return [n for n in dict.fromkeys(names) if n]


def _blocks(markdown: str) -> list[tuple[int, int, str, str]]:
    """(line, indent, kind, text): paragraphs, list items ('item') and table rows ('row'), in order."""
    out: list[tuple[int, int, str, str]] = []
    current: list[str] | None = None
    start = indent = 0
    kind = ""
    fenced = False
    in_list = False  # an indented paragraph after a blank line inside a list belongs to its item

    def close():
        nonlocal current
        if current:
            out.append((start, indent, kind, " ".join(s.strip() for s in current)))
        current = None

    for i, line in enumerate(markdown.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced:
            continue
        lead = len(line) - len(line.lstrip(" "))
        if not stripped or stripped.startswith("#"):
            close()
            in_list = in_list and not stripped
            continue
        if stripped.startswith("|"):
            close()
            in_list = False
            if not re.fullmatch(r"\|[\s:|-]+\|?", stripped):
                out.append((i, lead, "row", stripped))
            continue
        item = re.match(r"(?:[-*+]|\d+\.)\s", stripped)
        if item:
            close()
            current, start, indent, kind = [stripped[item.end():]], i, lead, "item"
            in_list = True
            continue
        if current is None:
            if lead >= 4 and not in_list:  # an indented code block
                continue
            in_list = in_list and lead > 0
            current, start, indent, kind = [stripped], i, lead, "para"
        else:
            current.append(stripped)
    close()
    return out


def units(markdown: str, name: str, results: Path = RESULTS) -> list[Unit]:
    """Each sentence and table row of a Markdown text with the results files it is held to."""
    out: list[Unit] = []
    parents: list[tuple[int, list[str]]] = []  # open list items: (indent, their citations)
    last_para: list[str] = []
    table_cites: list[str] = []
    previous_kind = ""
    for line, indent, kind, text in _blocks(markdown):
        own = _cited(text, results)
        if kind == "row":
            if previous_kind != "row":
                table_cites = last_para
            out.append(Unit(f"{name}:{line}", text, own or table_cites))
        else:
            inherited: list[str] = []
            if kind == "item":
                while parents and parents[-1][0] >= indent:
                    parents.pop()
                inherited = next((c for _, c in reversed(parents) if c), [])
                parents.append((indent, own or inherited))
            else:
                parents = [p for p in parents if p[0] < indent]
                inherited = next((c for _, c in reversed(parents) if c), []) if indent else []
            block_cites = own or inherited
            for sentence in _SENTENCE_END.split(text):
                out.append(Unit(f"{name}:{line}", sentence, _cited(sentence, results) or block_cites))
            last_para = own
        previous_kind = kind
    return out


def _evidence(name: str, results: Path) -> str | None:
    path = results / name
    if path.is_dir():
        return "\n".join(normalise(p.read_text(errors="replace")) for p in sorted(path.rglob("*")) if p.is_file())
    if path.is_file():
        return normalise(path.read_text(errors="replace"))
    return None


def problems(markdown: str, name: str, results: Path = RESULTS) -> list[str]:
    """Each figure not found in the files its sentence cites, each citation of a missing file, and each
    figure measured on a named GPU with no file cited."""
    found: list[str] = []
    cache: dict[str, str | None] = {}
    for unit in units(markdown, name, results):
        numbers = figures(unit.text)
        if not unit.cites:
            if numbers and _DEVICE.search(unit.text):
                found.append(f"{unit.source}: figures on a GPU with no results file cited: {unit.text[:160]}")
            continue
        texts, superseded = [], []
        for cited in unit.cites:
            if cited not in cache:
                cache[cited] = _evidence(cited, results)
            if cache[cited] is None:
                found.append(f"{unit.source}: cites docs/results/{cited}, which does not exist")
            elif cache[cited].startswith("> Superseded by"):
                superseded.append(cited)
            else:
                texts.append(cache[cited])
        if numbers and superseded and not texts:
            found.append(f"{unit.source}: its figures rest on superseded {', '.join(superseded)}: {unit.text[:160]}")
        if not texts:
            continue
        for number in numbers:
            if not any(holds(number, t) for t in texts):
                found.append(f"{unit.source}: {number} is not in {', '.join(unit.cites)}: {unit.text[:160]}")
    return found


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


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
    assert problems("Peaks 4,244.4-4,252 GB/s (`page.md`).", "R", results) == [
        "R:1: 4252 is not in page.md: Peaks 4,244.4-4,252 GB/s (`page.md`)."]
    assert len(problems("Peaks 4,244 GB/s (`page.md`).", "R", results)) == 1


def test_a_table_row_is_held_to_the_paragraph_above_its_table(results):
    text = ("Measured on an H200 ([p](results/page.md)):\n\n| a | b |\n| --- | --: |\n"
            "| eager | 212.4 ms |\n| x | 213 ms |\n")
    assert [p.split(": ")[1] for p in problems(text, "docs/x.md", results)] == ["213 is not in page.md"]


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


def test_a_nested_item_takes_its_parent_s_citation(results):
    text = "- On 2x H100 ([p](docs/results/page.md)):\n  - defaults 210.3 ms\n  - best 88.0 %\n- other 5 ms\n"
    assert [p.split(": ")[1] for p in problems(text, "R", results)] == ["88.0 is not in page.md"]


# --- the documents -------------------------------------------------------------------------------

@pytest.mark.parametrize("doc", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_figure_is_in_its_results_file(doc):
    found = problems(doc.read_text(), str(doc.relative_to(ROOT)))
    assert not found, f"{len(found)} figure(s) not backed by the file cited:\n" + "\n".join(found)


def test_every_results_page_names_its_device_and_commit():
    missing = []
    for page in sorted(RESULTS.glob("*.md")):
        if page.name == "README.md":
            continue
        text = page.read_text()
        if not re.search(r"(?im)^[-*>\s]*devices?\b[^:\n]*:", text):
            missing.append(f"{page.name}: no Device: line")
        if not re.search(r"(?im)^[-*>\s]*commits?\b[^:\n]*:.*\b[0-9a-f]{7,40}\b", text):
            missing.append(f"{page.name}: no Commit: line with a commit id")
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

"""Which figures of README.md and docs/*.md their results pages back, and which part of a page backs any.

The rule (tests/docs/test_docs_claims.py holds the docs to it):

- **Units.** Each table row is one unit. Any other text is cut into paragraphs and list items, each
  joined into one line, and those into sentences: a sentence ends at ".", "!" or "?" followed by
  white space and a capital letter, a backtick, "[", "(" or "*". Headings, HTML comments, code blocks
  (fenced or indented four spaces outside a list) and generated blocks (docs_generated.py) are skipped.
- **Citations.** A unit cites a results file by a Markdown link into docs/results/ (`docs/results/X`
  from the README, `results/X` from docs/), by a path `docs/results/X` or `results/X` written out, or
  by a file name in backticks that exists in docs/results/. A cited folder stands for every file in it.
  A sentence that cites nothing is held to the files its paragraph or list item cites, or else the
  list item it is nested under; a table row that cites nothing to those of the paragraph just above
  its table.
- **Figures.** A number with a unit: `%`, `x` written onto the number (`1.79x`; not `2x H100`), `ms`,
  `s`, `min`, `minutes`, `MiB`, `GiB`, `MB`, `GB`, `GB/s`, `TFLOP/s`, `GFLOP/s`, `TFLOP`, `times`. A range
  (`86.1-87.9 %`, `4,244-4,252 GB/s`) is two figures, each of which must be there, and so is each number of a list
  that shares one unit (`210.3, 284.0 and 310.7 ms`). The commit a measurement ran at counts as a figure too:
  "the last run, at b6905f5" (a commit id after "at": 7 to 40 hex digits, a digit and a letter among them).
- **Matching.** Thousands separators are dropped, a Unicode minus or dash reads as "-", and the sign is
  not compared. The number must appear in the *current part* of at least one cited file as written, as a
  whole number (not inside a longer one: `1.0` is not in `1.03`); zeros after it are allowed (`210.3`
  matches `210.30`). The unit is not compared, since tables carry theirs in the header.
- **The current part of a results page** (`current`) is what backs figures; the rest is history:
  - a page whose first line begins `> Superseded by` has none;
  - a section whose heading says `(... superseded ...)`, or whose first line begins `> Superseded by`,
    is left out, with its subsections;
  - a page that logs the same measurement again and again says so in a line before its first `##`
    section, `Series: newest first` or `Series: newest last`; only its newest `##` section is current.
  A sentence whose figures rest only on history is flagged (it may still cite history, without figures).
- **Measurements without a source.** A sentence that names an H100 or H200 and states a figure must
  cite a results file (itself or through its paragraph).
- **The index** (docs/results/README.md): each row's page exists; its status says `superseded` exactly
  when the page's first line does, and `partly superseded` exactly when a section of it is; every figure
  of a row that is not superseded is in the page's current part, and so is every commit its commit
  column names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_UNIT = (r"(?:x(?![\w/])(?!\s+H[12]00)(?!\s+GPU)|\s?%|\s(?:ms|s|min|minutes|MiB|GiB|MB|GB|GB/s|TFLOP/s|"
         r"GFLOP/s|TFLOP|times)(?![\w/]))")
# A figure, or a range of two: "86.1-87.9 %", "4,244-4,252 GB/s", "0.81x-1.20x".
_FIGURE = re.compile(rf"(?<![\w.])({_NUM})(?:{_UNIT}?\s?(?:-|to)\s?({_NUM}))?{_UNIT}")
# The numbers listed before a figure, which share its unit: "210.3, 284.0 and 310.7 ms".
_LISTED = re.compile(r"(?<![\w.,])(\d+(?:\.\d+)?)(?:,? and |,? or |, )$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PATH = re.compile(r"(?:docs/)?results/[\w.\-/]++(?![<{*$])")
_TICKED = re.compile(r"`([^`\s]+)`")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\[(*])")
_DEVICE = re.compile(r"\bH[12]00\b")
_HEADING = re.compile(r"(#{1,6})\s+(.*)")
_SERIES = re.compile(r"(?im)^series:.*\bnewest (first|last)\b")
_SECTION_SUPERSEDED = re.compile(r"(?i)\([^)]*\bsuperseded\b[^)]*\)")
# A commit id as the docs write one: 7 to 40 hex digits with a digit and a letter among them.
COMMIT = re.compile(r"(?<![\w.])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w])")
# The commit a measurement ran, as a sentence names it: "the last run, at b6905f5", "at `7260d86`".
_MEASURED_AT = re.compile(r"\bat `?(" + COMMIT.pattern + ")")
SUPERSEDED = "> Superseded by"
GENERATED = re.compile(r"<!-- generated: ([\w-]+)[^>]*-->\n(.*?)<!-- /generated -->", re.S)


def normalise(text: str) -> str:
    """Unicode minus and dashes as '-', no thousands separators, no space before '%'."""
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("\u2014", "-")
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return re.sub(r"(?<=\d) %", "%", text)


def figures(text: str) -> list[str]:
    """The numbers of every figure in a sentence, signs dropped, ranges split in two."""
    out: list[str] = []
    text = normalise(text)
    for m in _FIGURE.finditer(text):
        listed, before = [], text[:m.start()]
        while (n := _LISTED.search(before)) is not None:
            listed.insert(0, n.group(1))
            before = before[:n.start()]
        out.extend(listed + [n for n in m.groups() if n])
    return out


def holds(number: str, evidence: str) -> bool:
    """Whether `number` is written in the (normalised) evidence as a whole number."""
    tail = r"0*" if "." in number else r"(?:\.0+)?"
    return re.search(rf"(?<![\d.]){re.escape(number)}{tail}(?![\d])(?!\.\d)", evidence) is not None


# --- a results page: its sections, and the part that backs figures ------------------------------------

@dataclass(frozen=True)
class Section:
    level: int
    title: str
    start: int  # index of the heading line
    end: int  # index of the first line after the section (subsections included)


def sections(text: str) -> list[Section]:
    """Every heading of a Markdown text outside code blocks, with the lines it rules."""
    lines = text.splitlines()
    heads: list[tuple[int, int, str]] = []
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (m := _HEADING.fullmatch(line.rstrip())):
            heads.append((i, len(m.group(1)), m.group(2)))
    out = []
    for k, (start, level, title) in enumerate(heads):
        end = next((s for s, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        out.append(Section(level, title, start, end))
    return out


def series_order(text: str) -> str | None:
    """'first' or 'last' for a page whose `Series:` line (before its first `##` section) says which section is
    newest; None for any other page."""
    head = re.split(r"(?m)^## ", text, maxsplit=1)[0]
    m = _SERIES.search(head)
    return m.group(1).lower() if m else None


def _first_line_after(lines: list[str], index: int) -> str:
    return next((line.strip() for line in lines[index + 1:] if line.strip()), "")


def superseded_sections(text: str) -> list[Section]:
    """The sections a page marks as superseded, in the heading or in their first line."""
    lines = text.splitlines()
    return [s for s in sections(text)
            if _SECTION_SUPERSEDED.search(s.title) or _first_line_after(lines, s.start).startswith(SUPERSEDED)]


def current(text: str) -> str:
    """The part of a results page that backs figures (see the module's docstring)."""
    if text.startswith(SUPERSEDED):
        return ""
    lines = text.splitlines()
    keep = [True] * len(lines)
    order = series_order(text)
    top = [s for s in sections(text) if s.level == 2]
    if order and top:
        newest = top[0] if order == "first" else top[-1]
        keep = [newest.start <= i < newest.end for i in range(len(lines))]
    for s in superseded_sections(text):
        keep[s.start:s.end] = [False] * (s.end - s.start)
    return "\n".join(line for line, k in zip(lines, keep) if k)


class Pages:
    """The current part of each results file, read once (normalised). A folder stands for all its files."""

    def __init__(self, results: Path) -> None:
        self.results = results
        self._cache: dict[str, str | None] = {}

    def evidence(self, name: str) -> str | None:
        """None for a file or folder that does not exist."""
        if name not in self._cache:
            path = self.results / name
            if path.is_dir():
                files = sorted(p for p in path.rglob("*") if p.is_file())
                text: str | None = "\n".join(current(p.read_text(errors="replace")) for p in files)
            elif path.is_file():
                text = current(path.read_text(errors="replace"))
            else:
                text = None
            self._cache[name] = None if text is None else normalise(text)
        return self._cache[name]


# --- the docs: units and their citations -------------------------------------------------------------

@dataclass
class Unit:
    source: str  # "README.md:12"
    text: str
    cites: list[str] = field(default_factory=list)  # paths relative to docs/results/, as written


def cited(text: str, results: Path) -> list[str]:
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


def without_generated(markdown: str) -> str:
    """The text with each generated block's lines (markers included) blank: they are checked by construction."""
    return GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), markdown)


def _blocks(markdown: str) -> list[tuple[int, int, str, str]]:
    """(line, indent, kind, text): paragraphs, list items ('item') and table rows ('row'), in order."""
    out: list[tuple[int, int, str, str]] = []
    current_lines: list[str] | None = None
    start = indent = 0
    kind = ""
    fenced = comment = False
    in_list = False  # an indented paragraph after a blank line inside a list belongs to its item

    def close():
        nonlocal current_lines
        if current_lines:
            out.append((start, indent, kind, " ".join(s.strip() for s in current_lines)))
        current_lines = None

    for i, line in enumerate(markdown.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced:
            continue
        if comment or stripped.startswith("<!--"):
            close()
            comment = "-->" not in stripped
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
            current_lines, start, indent, kind = [stripped[item.end():]], i, lead, "item"
            in_list = True
            continue
        if current_lines is None:
            if lead >= 4 and not in_list:  # an indented code block
                continue
            in_list = in_list and lead > 0
            current_lines, start, indent, kind = [stripped], i, lead, "para"
        else:
            current_lines.append(stripped)
    close()
    return out


def units(markdown: str, name: str, results: Path) -> list[Unit]:
    """Each sentence and table row of a Markdown text with the results files it is held to."""
    out: list[Unit] = []
    parents: list[tuple[int, list[str]]] = []  # open list items: (indent, their citations)
    last_para: list[str] = []
    table_cites: list[str] = []
    previous_kind = ""
    for line, indent, kind, text in _blocks(without_generated(markdown)):
        own = cited(text, results)
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
                out.append(Unit(f"{name}:{line}", sentence, cited(sentence, results) or block_cites))
            last_para = own
        previous_kind = kind
    return out


def problems(markdown: str, name: str, results: Path) -> list[str]:
    """Each figure not in the current part of the files its sentence cites, each citation of a missing file,
    and each figure measured on a named GPU with no file cited."""
    found: list[str] = []
    pages = Pages(results)
    for unit in units(markdown, name, results):
        numbers = figures(unit.text)
        if not unit.cites:
            if numbers and _DEVICE.search(unit.text):
                found.append(f"{unit.source}: figures on a GPU with no results file cited: {unit.text[:160]}")
            continue
        texts, history = [], []
        for name_cited in unit.cites:
            evidence = pages.evidence(name_cited)
            if evidence is None:
                found.append(f"{unit.source}: cites docs/results/{name_cited}, which does not exist")
            elif evidence.strip():
                texts.append(evidence)
            else:
                history.append(name_cited)
        if (numbers or _MEASURED_AT.search(unit.text)) and history and not texts:
            found.append(f"{unit.source}: its figures rest on superseded {', '.join(history)}: {unit.text[:160]}")
        if not texts:
            continue
        for number in numbers:
            if not any(holds(number, t) for t in texts):
                found.append(f"{unit.source}: {number} is not in the current part of {', '.join(unit.cites)}: "
                             f"{unit.text[:160]}")
        for commit in _MEASURED_AT.findall(unit.text):
            if not any(commit in t for t in texts):
                found.append(f"{unit.source}: commit {commit} is not in the current part of "
                             f"{', '.join(unit.cites)}: {unit.text[:160]}")
    return found


# --- the index of the results pages ------------------------------------------------------------------

def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split(" | ")]


def index_problems(results: Path) -> list[str]:
    """What the index (results/README.md) says of its pages that the pages do not: see the module's docstring."""
    found: list[str] = []
    pages = Pages(results)
    rows = [line for line in (results / "README.md").read_text().splitlines() if line.startswith("| [")]
    for row in rows:
        cells = _cells(row)
        link = _LINK.search(cells[0])
        if link is None or len(cells) < 5:
            found.append(f"index row with no page link or fewer than 5 columns: {row[:120]}")
            continue
        name, what, commits, status = link.group(1), cells[1], cells[3], cells[4].lower()
        page = results / name
        if not page.is_file():
            found.append(f"{name}: listed in the index, but no such page")
            continue
        text = page.read_text(errors="replace")
        whole, part = text.startswith(SUPERSEDED), bool(superseded_sections(text))
        said_whole, said_part = status.startswith("superseded"), status.startswith("partly superseded")
        if whole != said_whole:
            found.append(f"{name}: the index says {cells[4]!r}, the page's first line "
                         + ("says it is superseded" if whole else f"does not begin {SUPERSEDED!r}"))
        if not whole and part != said_part:
            found.append(f"{name}: the index says {cells[4]!r}, but "
                         + ("sections of the page are superseded" if part else "no section of the page is superseded"))
        if whole:
            continue
        evidence = pages.evidence(name) or ""
        for number in figures(what):
            if not holds(number, evidence):
                found.append(f"{name}: the index's {number} is not in the page's current part: {what[:160]}")
        for commit in COMMIT.findall(commits):
            if commit not in evidence:
                found.append(f"{name}: the index's commit {commit} is not in the page's current part")
    return found

"""Figures of README.md and docs/*.md written from their results records, never by hand.

A doc holds such figures in a block of their own, a paragraph between two comments:

    <!-- generated: NAME (tests/docs/docs_generated.py) -->
    ...
    <!-- /generated -->

tests/docs/test_docs_claims.py makes every block again from the results pages and fails where the text differs,
so a new measurement in a page makes the docs that draw on it fail until they are made again:
`python tests/docs/docs_generated.py` rewrites every block in place.

Each generator reads the newest record of its page:
- `gpu-suite`: the newest section of gpu_suite_2xh200.md (a `Series: newest first` page), whose heading reads
  `..., at `COMMIT`: RESULT`;
- `suite-time` and `fast-tier`: the last row of the last table in test_suite_time.md that a line
  `<!-- record: whole-suite -->` or `<!-- record: fast-tier -->` marks (a clean clone's `.ci/run`, and the fast
  tier, the README's `pytest -m "not e2e"`); its first column names the commit, its `wall` column the time.
"""
from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from docs_claims import COMMIT, GENERATED, sections, series_order

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 110


class RecordError(ValueError):
    """A results page that no longer has the record a generator reads, in the shape it reads."""


def _wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, break_long_words=False, break_on_hyphens=False)


def _newest_heading(results: Path, name: str) -> str:
    text = (results / name).read_text()
    order = series_order(text)
    top = [s for s in sections(text) if s.level == 2]
    if order is None or not top:
        raise RecordError(f"{name}: no `Series: newest first|last` line, or no `##` section")
    return (top[0] if order == "first" else top[-1]).title


def _marked_table(results: Path, name: str, record: str) -> dict[str, str]:
    """The last row of the last table that `<!-- record: RECORD -->` marks, by its header's (lower-case) names."""
    lines = (results / name).read_text().splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() == f"<!-- record: {record} -->"]
    if not marks:
        raise RecordError(f"{name}: no table marked <!-- record: {record} -->")
    table = []
    for line in lines[marks[-1] + 1:]:
        if not line.startswith("|") and table:
            break
        if line.startswith("|"):
            table.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    if len(table) < 3:
        raise RecordError(f"{name}: the table marked {record} has no row")
    header = [h.lower() for h in table[0]]
    return dict(zip(header, table[-1]))


def _commit(cell: str, name: str) -> str:
    m = COMMIT.search(cell)
    if m is None:
        raise RecordError(f"{name}: no commit in the record's first column: {cell!r}")
    return m.group(0)


def _wall(row: dict[str, str], name: str) -> str:
    m = re.search(r"\d[\d,.]* s\b", row.get("wall", ""))
    if m is None:
        raise RecordError(f"{name}: no wall time in seconds in the record's `wall` column: {row}")
    return m.group(0)


def gpu_suite(results: Path, prefix: str) -> str:
    name = "gpu_suite_2xh200.md"
    heading = _newest_heading(results, name)
    m = re.fullmatch(r".*, at `([0-9a-f]{7,40})`: (.+)", heading)
    if m is None:
        raise RecordError(f"{name}: the newest section's heading does not read '..., at `COMMIT`: RESULT': {heading}")
    return _wrap(f"The last call of the whole `-m gpu` suite, at `{m.group(1)}` on two GPUs: {m.group(2)} "
                 f"([{name}]({prefix}{name}), every call).")


def suite_time(results: Path, prefix: str) -> str:
    name = "test_suite_time.md"
    row = _marked_table(results, name, "whole-suite")
    commit = _commit(next(iter(row.values())), name)
    result = row.get("result", "").replace("**", "")
    return _wrap(f"The latest clean-clone run of the README's test command (`.ci/run`) on the project's 2-core CI machine, "
                 f"at `{commit}`: "
                 f"{_wall(row, name)}, {result} ([{name}]({prefix}{name}), every run).")


def fast_tier(results: Path, prefix: str) -> str:
    name = "test_suite_time.md"
    row = _marked_table(results, name, "fast-tier")
    commit = _commit(next(iter(row.values())), name)
    return _wrap(f"The fast tier's latest run (`pytest -m \"not e2e\"`) on the 2-core development machine, at `{commit}`: "
                 f"{_wall(row, name)} "
                 f"([{name}]({prefix}{name})).")


GENERATORS: dict[str, Callable[[Path, str], str]] = {
    "gpu-suite": gpu_suite, "suite-time": suite_time, "fast-tier": fast_tier}


def prefix_for(doc: Path, results: Path) -> str:
    """How the doc links into the results folder: `docs/results/` from the README, `results/` from docs/."""
    return results.relative_to(doc.parent).as_posix() + "/"


def made(markdown: str, results: Path, prefix: str) -> str:
    """The text with every generated block made again from the results records."""
    def make(m: re.Match) -> str:
        generator = GENERATORS.get(m.group(1))
        if generator is None:
            raise RecordError(f"no generator named {m.group(1)!r}: {sorted(GENERATORS)}")
        opening = m.group(0).split("\n", 1)[0]
        return f"{opening}\n{generator(results, prefix)}\n<!-- /generated -->"

    return GENERATED.sub(make, markdown)


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def main() -> int:
    results = ROOT / "docs" / "results"
    for doc in documents():
        text = doc.read_text()
        new = made(text, results, prefix_for(doc, results))
        if new != text:
            doc.write_text(new)
            print(f"rewrote the generated blocks of {doc.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

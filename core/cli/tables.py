"""The tables the CLI prints (`run`, `import`, `sweep`, `attention`): fitted to a terminal, or plain
text for a pipe or a file. A `CliTable` decides when it is printed, from the console it is printed on.

On a terminal (rich's `Console.is_terminal`: stdout is a tty, or FORCE_COLOR / TTY_COMPATIBLE say so):

- number columns never shrink: each is as wide as its widest value, right-aligned, never wrapped or
  cut; only their headers wrap, at spaces ("total (ms)" becomes "total" over "(ms)");
- name columns (kernels, NVTX ranges) give way first, down to NAME_MIN cells, shortened in the middle
  ("void cutlass::Kern…_nn_align4>"), so a kernel keeps its family and its tile shape or template tail;
- label columns (category, domain, phase) then give way down to LABEL_MIN cells (or their header's
  longest word), cut at the end; then names go on down to NAME_FLOOR;
- when even that does not fit, each row becomes a block of `header: value` lines, numbers whole;
- "…" between the two halves of a name, "..." when the terminal's encoding is not UTF-8.

Anywhere else (`| less`, `> report.txt`, `| awk`): tab-separated plain text, no ANSI codes, no box
drawing, nothing shortened. A table is its title as a `# ` line, one header line, one line per row,
its caption as `# ` lines, then a blank line; numbers lose their thousands separators so awk and
spreadsheets read them as numbers (an interval stays `[a, b]`). `awk -F'\\t' '!/^#/ && NF'` leaves the
header and the rows.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

Kind = Literal["number", "label", "name"]

NAME_MIN = 20  # names shrink to this before any label is cut
LABEL_MIN = 6
NAME_FLOOR = 8  # below this a name says too little: the rows are stacked instead
GAP = 2  # cells between columns (SIMPLE_HEAD with collapsed padding, no edges)

# A thousands separator: a comma between digits, three digits after it. An interval's "[a, b]" keeps its comma.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")

# SIMPLE_HEAD drawn in ASCII: rich's own substitute for it (box.ASCII) puts bars between columns.
ASCII_SIMPLE_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)

# Characters the CLI's titles and cells use that a non-UTF-8 terminal may not encode.
ASCII_FORMS = str.maketrans({"…": "...", "–": "-", "—": "-", "·": "|", "±": "+/-", "µ": "u"})


@dataclass(frozen=True)
class Column:
    header: str  # with its unit, e.g. "total (ms)"
    kind: Kind = "number"


@dataclass
class CliTable:
    """Rows of cells (str is plain text, never markup; a Text keeps its style) under typed columns."""

    title: str
    columns: list[Column]
    rows: list[list[Text]] = field(default_factory=list)
    caption: str = ""  # may hold several lines
    title_justify: Literal["left", "center", "right"] = "center"

    def add_row(self, *cells: str | Text) -> None:
        self.rows.append([c.copy() if isinstance(c, Text) else Text(c) for c in cells])  # shared cells stay as given

    def plain(self) -> str:
        """The tab-separated form (see the module's docstring), ending in a blank line."""
        lines = [f"# {line}" for line in self.title.splitlines()]
        lines.append("\t".join(_field(c.header) for c in self.columns))
        for row in self.rows:
            lines.append("\t".join(_field(_THOUSANDS.sub("", cell.plain) if col.kind == "number" else cell.plain)
                                   for col, cell in zip(self.columns, row)))
        lines += [f"# {line}" for line in self.caption.splitlines()]
        return "\n".join(lines) + "\n\n"

    def ascii_forms(self) -> CliTable:
        """This table with ASCII in place of the dashes, dots and ellipses a non-UTF-8 stream cannot take."""
        def tr(cell: Text) -> Text:
            plain = cell.plain.translate(ASCII_FORMS)
            return cell if plain == cell.plain else Text(plain, style=cell.style)
        return CliTable(self.title.translate(ASCII_FORMS), [Column(c.header.translate(ASCII_FORMS), c.kind)
                                                            for c in self.columns],
                        [[tr(c) for c in row] for row in self.rows], self.caption.translate(ASCII_FORMS),
                        self.title_justify)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table, ellipsis = (self.ascii_forms(), "...") if options.ascii_only else (self, "…")
        if not console.is_terminal:
            # Written past rich on purpose: rich would crop every line to a width nobody has here.
            console.file.write(table.plain())
            console.file.flush()
            return
        widths = fit_widths(table, options.max_width)
        if widths is None:
            yield from table._stacked(options.max_width, ellipsis)
            return
        t = Table(title=table.title or None, caption=table.caption or None,
                  box=ASCII_SIMPLE_HEAD if options.ascii_only else box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, padding=(0, 1), collapse_padding=True,
                  title_justify=table.title_justify, caption_justify="left")
        for col, w in zip(table.columns, widths):
            t.add_column(Text(wrap_header(col.header, w)), width=w, min_width=w, no_wrap=True, overflow="crop",
                         justify="right" if col.kind == "number" else "left")
        for row in table.rows:
            t.add_row(*(_fitted(cell, col.kind, w, ellipsis) for col, cell, w in zip(table.columns, row, widths)))
        yield t
        yield Text("")  # a blank line ends a table, as in the plain form, so the next title stands apart

    def _stacked(self, width: int, ellipsis: str) -> Iterable[Text]:
        """Each row as `header: value` lines: for terminals too narrow for the numbers side by side."""
        if self.title:
            yield Text(self.title, style="bold")
        label = max(cell_len(c.header) for c in self.columns) + 2
        room = max(width - label, NAME_FLOOR)
        for row in self.rows:
            yield Text("")
            for col, cell in zip(self.columns, row):
                yield Text.assemble((f"{col.header}:".ljust(label), "bold"), _fitted(cell, col.kind, room, ellipsis),
                                    no_wrap=True, overflow="crop")
        if self.caption:
            yield Text("")
            yield Text(self.caption)
        yield Text("")


def fit_widths(table: CliTable, width: int) -> list[int] | None:
    """Column widths summing (with the gaps) to at most `width`, or None when the numbers cannot fit.

    Each stage lowers a floor for some columns and takes cells from the widest above its floor, so
    widths stay even: number headers wrap, then names shrink to NAME_MIN, then labels, then names again.
    """
    cols = table.columns
    content = [max((cell_len(row[i].plain) for row in table.rows), default=0) for i in range(len(cols))]
    word = [max(cell_len(w) for w in c.header.split() or [""]) for c in cols]
    widths = [max(content[i], cell_len(c.header)) for i, c in enumerate(cols)]
    room = width - GAP * (len(cols) - 1)
    number_floor = [max(content[i], word[i]) if c.kind == "number" else widths[i] for i, c in enumerate(cols)]
    stages: list[dict[Kind, Callable[[int], int]]] = [
        {"number": lambda i: number_floor[i]},
        {"name": lambda i: max(NAME_MIN, word[i])},
        {"label": lambda i: max(LABEL_MIN, word[i])},
        {"name": lambda i: max(NAME_FLOOR, word[i])},
    ]
    for stage in stages:
        floors = [min(widths[i], stage[c.kind](i)) if c.kind in stage else widths[i] for i, c in enumerate(cols)]
        excess = sum(widths) - room
        while excess > 0:
            slack = [i for i in range(len(cols)) if widths[i] > floors[i]]
            if not slack:
                break
            widest = max(slack, key=lambda i: widths[i])
            widths[widest] -= 1
            excess -= 1
        if excess <= 0:
            return widths
    return None


def wrap_header(header: str, width: int) -> str:
    """The header's words on as few lines of `width` cells as they fit (a longer word stays whole)."""
    lines: list[str] = []
    for w in header.split():
        if lines and cell_len(lines[-1]) + 1 + cell_len(w) <= width:
            lines[-1] += " " + w
        else:
            lines.append(w)
    return "\n".join(lines)


def middle_ellipsis(name: str, width: int, ellipsis: str = "…") -> str:
    """`name` in at most `width` cells: its start and its end with `ellipsis` between.

    The start names a kernel's family, the end its tile shape or template arguments; the middle is
    what differs least between the rows of one table.
    """
    if cell_len(name) <= width:
        return name
    room = width - cell_len(ellipsis)
    if room <= 1:
        return _take(name, width)
    head = (room + 1) // 2
    return _take(name, head) + ellipsis + _take(name[::-1], room - head)[::-1]


def end_ellipsis(label: str, width: int, ellipsis: str = "…") -> str:
    """A label cut at the end: its start is what tells labels apart."""
    if cell_len(label) <= width:
        return label
    room = width - cell_len(ellipsis)
    return _take(label, width) if room < 1 else _take(label, room) + ellipsis


def print_note(console: Console, note: Text) -> None:
    """A line beside the tables: as it is on a terminal; a `# ` line, never wrapped, anywhere else."""
    if console.is_terminal:
        console.print(note, highlight=False)
    else:
        console.print("# " + note.plain, soft_wrap=True, markup=False, highlight=False, emoji=False)


def _take(s: str, cells: int) -> str:
    """The longest prefix of `s` that fits in `cells` terminal cells."""
    out, used = [], 0
    for ch in s:
        used += cell_len(ch)
        if used > cells:
            break
        out.append(ch)
    return "".join(out)


def _fitted(cell: Text, kind: Kind, width: int, ellipsis: str) -> Text:
    if kind == "number":
        return cell  # never shortened: the column is as wide as its widest value
    plain = cell.plain
    short = middle_ellipsis(plain, width, ellipsis) if kind == "name" else end_ellipsis(plain, width, ellipsis)
    if short == plain:
        return cell
    return Text(short, style=cell.style)


def _field(s: str) -> str:
    """One tab-separated field: a tab or newline inside would split the row."""
    return s.replace("\t", " ").replace("\n", " ")

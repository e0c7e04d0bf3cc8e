"""The text timeline that `perfconsole timeline` prints and `timeline --svg` and `export --format svg` write: a
header naming the source, the window line, the rows and the time axis (render), the legend, and each rank's busy
share and longest idle gaps (captions). One `draw` builds it; `lines` are its plain text, `styled` the same text
coloured by category (render.STYLES), `svg` that coloured text recorded by rich and exported as an SVG image.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

from rich.text import Text

from perfconsole.core.record import RunRecord
from perfconsole.core.timeline.captions import busy_lines, legend, window_line
from perfconsole.core.timeline.model import Timeline
from perfconsole.core.timeline.render import STYLES, Frame, render

LABEL_WIDTH = 12        # the rows' labels ("gpu0 ranges", "t1234 launch") take about this much
EXPORT_WIDTH = 120      # cells across in `export --format svg`, as `timeline` draws in a pipe


@dataclass(frozen=True)
class Drawing:
    lines: list[str]    # header, window line, rows, axis, legend, busy lines: what `timeline` prints
    frame: Frame
    title: str          # what the drawing is of (the SVG's title)


def label_width(tl: Timeline, rank: int | None) -> int:
    """The cells the rows' labels take, with the rank's prefix ("r1 ") where every rank of a job is drawn."""
    return LABEL_WIDTH + (3 if len(tl.ranks) > 1 and rank is None else 0)


def draw(tl: Timeline, source: str, width: int, step: int | None = None, rank: int | None = None,
         ascii_only: bool = False, launches: bool = False, depth: int = 4) -> Drawing:
    """The window of profiled step `step` (the whole trace where None) of `rank` (every rank where None) at `width`
    cells; TimelineError (one line) for a rank or step the trace does not hold."""
    if rank is not None:
        tl.rank(rank)
    chosen = tl.step(step, rank) if step is not None else None
    t0, t1 = (chosen.start, chosen.end) if chosen else tl.span(rank)
    frame = render(tl, t0, t1, width, rank, ascii_only, launches, depth)
    ranks = [rank] if rank is not None else [r.rank for r in tl.ranks]
    steps = len(tl.rank(ranks[0]).steps)
    head = source + (f" · rank {rank}" if rank is not None else f" · {len(tl.ranks)} ranks" if len(tl.ranks) > 1
                     else "")
    lines = [head, window_line(frame.t0, frame.t1, width, step, steps), *frame.lines(), legend(ascii_only)]
    for r in ranks:
        lines += busy_lines(tl, r, frame.t0, frame.t1)
    title = f"{Path(source).name}" + (f" · step {step}" if step is not None else "") + \
        (f" · rank {rank}" if rank is not None else "")
    return Drawing(lines, frame, title)


def styled(d: Drawing) -> Text:
    """The drawing's lines as one Text: each row's cells in their category's style, the rest plain."""
    frame = d.frame
    w = max([len(r.label) for r in frame.rows] + [len(frame.unit) + 4])
    text = Text()
    for line in d.lines[:2]:
        text.append(line + "\n")
    for row in frame.rows:
        text.append(f"{row.label:<{w}} ")
        cells = list(zip(row.text, row.cats))
        for cat, run in groupby(cells, key=lambda cell: cell[1]):   # a span a run of one category
            text.append("".join(ch for ch, _ in run), style=STYLES.get(cat, ""))
        text.append("\n")
    text.append("\n".join(d.lines[2 + len(frame.rows):]))
    return text


def svg(d: Drawing) -> str:
    """The coloured drawing as an SVG document (rich's recorder), as wide as its longest line."""
    from rich.cells import cell_len
    from rich.console import Console

    width = max(cell_len(line) for line in d.lines)
    console = Console(record=True, width=width, file=io.StringIO(), color_system="truecolor", no_color=False,
                      highlight=False, markup=False, emoji=False, legacy_windows=False)
    console.print(styled(d), soft_wrap=True)
    return console.export_svg(title=f"perfconsole timeline: {d.title}")


def record_svg(record: RunRecord, snapshot: Path | None = None) -> str:
    """A profiled run's whole timeline as an SVG, drawn as `perfconsole timeline SNAPSHOT` prints it in a pipe
    (every rank, EXPORT_WIDTH cells, Unicode blocks); TimelineError (one line) where the run has no trace here."""
    from perfconsole.core.timeline.load import load_timeline
    from perfconsole.core.timeline.source import record_traces

    traces = record_traces(record, snapshot)
    tl = load_timeline([t for _, t in traces], [r for r, _ in traces])
    return svg(draw(tl, str(snapshot) if snapshot is not None else record.name, EXPORT_WIDTH))

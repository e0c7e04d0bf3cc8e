"""Step time over steps as stacked columns: forward, backward and optimizer, warm-up steps marked."""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from perfconsole.core.events import Step
from perfconsole.tui.glyphs import UNICODE, Glyphs

PHASE_STYLES = (("forward_ms", "fwd", "dodger_blue1"), ("backward_ms", "bwd", "magenta"),
                ("optimizer_ms", "opt", "yellow"))
WARMUP_STYLE = "grey50"


class StepChart(Widget):
    DEFAULT_CSS = "StepChart { height: 9; }"

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.steps: list[Step] = []

    def set_steps(self, warmup: list[Step], measured: list[Step]) -> None:
        self.steps = [*warmup, *measured]
        self.refresh()

    def render(self) -> Text:
        width, height = self.size.width, self.size.height
        plot_h = max(1, height - 2)          # one line of axis labels, one legend line
        axis_w = 8
        cols = max(1, width - axis_w)
        steps = self.steps[-cols:]
        if not steps:
            return Text("no steps yet", style="dim")
        top = max(s.total_ms for s in steps) or 1.0
        # Each column is a list of styles from the bottom up, one per row.
        columns: list[list[tuple[str, str]]] = []
        for s in steps:
            cells: list[tuple[str, str]] = []
            if s.warmup:
                n = round(s.total_ms / top * plot_h)
                cells = [(self.glyphs.warmup, WARMUP_STYLE)] * n
            else:
                acc = 0.0
                for (attr, _, style), glyph in zip(PHASE_STYLES, self.glyphs.phases):
                    v = getattr(s, attr)
                    if v is None:
                        continue
                    start, acc = acc, acc + v
                    n = round(acc / top * plot_h) - round(start / top * plot_h)
                    cells += [(glyph, style)] * n
                rest = round(s.total_ms / top * plot_h) - len(cells)  # time outside the three phases
                cells += [(self.glyphs.phases[-1], "grey70")] * max(0, rest)
            columns.append(cells)
        # Each step as wide as the plot allows, so a few steps fill it as many do; from 3 columns a step on, a
        # space between steps keeps them apart.
        each = max(1, cols // len(columns))
        filled = each - 1 if each >= 3 else each
        text = Text(no_wrap=True, overflow="crop")
        for row in range(plot_h - 1, -1, -1):
            label = f"{top:>6.1f}ms" if row == plot_h - 1 else ("     0ms" if row == 0 else "")
            text.append(f"{label:<{axis_w}}"[:axis_w], style="dim")
            for cells in columns:
                ch, style = cells[row] if row < len(cells) else (" ", "")
                text.append(ch * filled, style=style)
                text.append(" " * (each - filled))
            text.append("\n")
        first = steps[0].index
        text.append(" " * axis_w + f"step {first}..{steps[-1].index}", style="dim")
        text.append("\n")
        text.append(" " * axis_w)
        for (_, name, style), glyph in zip(PHASE_STYLES, self.glyphs.phases):
            text.append(glyph, style=style)
            text.append(f" {name}  ")
        text.append(self.glyphs.warmup, style=WARMUP_STYLE)
        text.append(" warm-up")
        return text

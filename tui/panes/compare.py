"""Two or more marked runs side by side, from core.reports.compare.Comparison: spec differences highlighted,
phase statistics, speedup with its interval, tokens/s, peak memory, category shares, kernel moves, and
below them each run's step times as a box plot on a shared ms axis."""
from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from perfconsole.core.reports.compare import PHASE_NAMES, Comparison
from perfconsole.core.reports.names import cut, differs_first
from perfconsole.tui.format import num, shorten
from perfconsole.tui.glyphs import UNICODE, Glyphs, bar
from perfconsole.tui.widgets.step_distribution import StepDistribution


MIN_HEAD = 16   # a run's column head is never cut shorter than this, however many runs share the width


def row_labels(c: Comparison) -> list[str]:
    """Every row label the tables below may show (their first column)."""
    shares = c.category_shares()
    return [*c.spec_differences(), "(identical specs)", *(p[:-3] for p in PHASE_NAMES), "median", c.basis(),
            "tokens/s", "peak MiB", "scaling eff.", *c.communication(), *(k for s in shares if s for k in s)]


def column_heads(c: Comparison, width: int) -> list[str]:
    """Each run's column head: what tells it apart first (core.reports.names.differs_first), cut to its share
    of `width` once the row labels have theirs: whole where it fits."""
    label = max(map(len, row_labels(c)))
    each = max(MIN_HEAD, (width - label - 2 * len(c.runs)) // len(c.runs))   # a column is padded 1 a side
    return [cut(head, each) for head in differs_first(c.runs)]


VERDICT_STYLES = {"regression": "bold red", "improved": "bold green", "same": "bold green",
                  "inconclusive": "bold yellow", "failed": "bold red", "unmeasured": "dim"}


def gate_verdict(g) -> Text:
    """A gate's verdict, each metric's with its interval, and how the gate ran (core.reports.gate)."""
    from perfconsole.core.reports import gate as report

    text = Text(report.headline(g) + "\n", style=VERDICT_STYLES.get(g.verdict, "bold"))
    for verdict, line in report.verdict_lines(g):
        text.append(f"  {line}\n", style=VERDICT_STYLES.get(verdict, ""))
    for line in report.footer(g):
        text.append(f"  {line}\n", style="dim")
    return text


class ComparePane(VerticalScroll):
    BINDINGS = [
        Binding("e", "app.export_comparison", "Export", id="compare.export"),
        Binding("s", "app.save_comparison", "Save", id="compare.save"),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.comparison: Comparison | None = None
        self.room = 0

    def compose(self) -> ComposeResult:
        yield Static("mark two or more runs in Runs (5, space) and press c", id="compare-body")
        yield StepDistribution(self.glyphs, id="compare-dist")

    def show(self, c: Comparison | None) -> None:
        self.comparison = c
        # The width it has, or, hidden (shown before its tab is), the terminal's, which it spans less its scrollbar.
        self.room = (self.size.width or self.app.size.width) - 2
        body = self.query_one("#compare-body", Static)
        self.query_one("#compare-dist", StepDistribution).show(c.runs if c is not None else [])
        if c is None:
            body.update("mark two or more runs in Runs (5, space) and press c")
            return
        body.update(Group(*self._tables(c)))

    def on_resize(self) -> None:
        if self.comparison is not None:
            self.show(self.comparison)

    def _table(self, title: str, c: Comparison) -> Table:
        t = Table(title=title, title_justify="left", title_style="bold", expand=False, pad_edge=False,
                  box=None, show_edge=False)
        t.add_column("")
        for i, head in enumerate(column_heads(c, self.room)):
            t.add_column(f"{i + 1}{' (base)' if i == 0 else ''}\n{head}", justify="right")
        return t

    def _tables(self, c: Comparison) -> list:
        out: list = []
        gate = getattr(c, "gate", None)  # a gate's record opened here (core.reports.gate.GateComparison)
        if gate is not None:
            out += [gate_verdict(gate), Text("")]
        diffs = c.spec_differences()
        spec = self._table("Spec differences", c)
        if diffs:
            for k, vals in diffs.items():
                spec.add_row(k, *(Text(str(v), style="bold yellow") for v in vals))
        else:
            spec.add_row("(identical specs)", *("" for _ in c.runs))
        out += [spec, Text("")]
        pooled = ", all processes pooled" if c.between_processes() else ""
        times = self._table(f"Time per step (ms, mean +- std of the steps{pooled})", c)
        for p in PHASE_NAMES:
            stats = c.phase_stats(p)
            if any(s is not None for s in stats):
                times.add_row(p[:-3], *("-" if s is None else f"{s.mean:,.3f} +- {s.std:,.3f}" for s in stats))
        times.add_row("median", *("-" if s is None else f"{s.median:,.3f}" for s in c.phase_stats("total_ms")))
        times.add_row(c.basis(), *("-" if s is None else f"{s.mean:,.3f}" for s in c.speedup_stats()))
        times.add_row("tokens/s", *(num(v, ",.0f") for v in c.tokens_per_s()))
        times.add_row("peak MiB", *(num(v, ",.0f") for v in c.peak_memory_mib()))
        if any(s != "-" for s in c.scaling()):
            times.add_row("scaling eff.", *c.scaling())
        for k, vals in c.communication().items():
            times.add_row(k, *(num(v, ",.2f") for v in vals))
        out += [times, Text("")]
        sp = Text("Speedup of the step against run 1:\n", style="bold")
        note = c.work_note()
        if note:  # a ratio of unlike work is no speedup: say so before the numbers
            sp.append(f"  {note}\n", style="bold red")
        heads = differs_first(c.runs)
        for i, (s, text) in enumerate(zip(c.speedups(), c.speedup_texts())):
            if i == 0:
                continue
            style = "dim" if s is None or not s.significant else ("green" if s.ratio > 1 else "red")
            sp.append(f"  {i + 1} {cut(heads[i], max(30, self.room - 6 - len(text)))}: ", style="")
            sp.append(text + "\n", style=style)
        sp.append(f"  ({c.speedup_rule()}; {c.interval_basis()})\n", style="dim")
        throughput = c.throughput_note()
        if throughput:  # tokens/s above and the speedup are of different statistics here: say why they disagree
            sp.append(f"  {throughput}\n", style="bold")
        out += [sp]
        shares = c.category_shares()
        if any(s is not None for s in shares):
            cats = sorted({k for s in shares if s for k in s}, key=lambda k: -max((s or {}).get(k, 0) for s in shares))
            t = self._table("Kernel time by category", c)
            for k in cats:
                t.add_row(k, *("-" if s is None else f"{bar(s.get(k, 0), 8, self.glyphs)} {s.get(k, 0):5.1%}"
                               for s in shares))
            out += [t, Text("")]
        moves = c.kernel_moves()
        if moves:
            t = Table(title="Kernels whose time moved most (total ms)", title_justify="left", title_style="bold",
                      box=None, pad_edge=False)
            t.add_column("kernel")
            for i in range(len(c.runs)):
                t.add_column(str(i + 1), justify="right")
            t.add_column("change", justify="right")
            for m in moves:
                t.add_row(shorten(m.name, 40), *("-" if v is None else f"{v / 1e6:,.3f}" for v in m.times_ns),
                          Text(f"{m.delta_ns / 1e6:+,.3f}", style="red" if m.delta_ns > 0 else "green"))
            out.append(t)
        return out

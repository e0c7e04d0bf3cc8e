"""The live run: spec header, status with elapsed time and the cancel key, the step chart, the step
table, the stats panel and the GPU panel. It draws whatever RunRecord it is given; the app folds the
worker's events into that record and calls `refresh_record`.

The pane scrolls where it does not fit (a data-parallel job's lines above the body at 80x24): PgUp/PgDn
page it while it can move, then page the step table; Home/End go to its top/bottom and the table's
first/last row."""
from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.actions import SkipAction
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from perfconsole.core.events import Step
from perfconsole.core.telemetry.nvml import GpuSample
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.parallel import job_line, rank_rows
from perfconsole.core.reports.run import host_flag, start_line, start_text
from perfconsole.core.reports.telemetry import flag_text
from perfconsole.core.telemetry.gpu_summary import Telemetry
from perfconsole.tui.format import duration
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.console_table import ConsoleTable
from perfconsole.tui.widgets.gpu_panel import GpuPanel
from perfconsole.tui.widgets.stats_panel import StatsPanel
from perfconsole.tui.widgets.step_chart import StepChart

STATUS_STYLE = {"running": "bold yellow", "pending": "yellow", "ok": "bold green", "oom": "bold red",
                "error": "bold red", "cancelled": "bold magenta", "imported": "cyan"}
TABLE_PERIOD_S = 1.0
STATUS_WORDS = {"ok": "finished", "oom": "OUT OF MEMORY", "error": "FAILED", "cancelled": "CANCELLED",
                "running": "running", "pending": "starting", "imported": "imported"}


def spec_header(r: RunRecord) -> str:
    if r.status == "imported":  # a profiler's files: there was no spec, and the defaults are not one
        return f"{r.name} · an imported profile: no run spec, no timed steps"
    s = r.spec
    extra = f" · attention {s.attention}" + (" · compile" if s.compile else "") + (" · tf32" if s.tf32 else "")
    prof = f" · profiler {s.profile}" if s.profile != "none" else ""
    return f"{r.name} · {s.device} · warm-up {s.warmup} + {s.steps} steps{extra}{prof}"


class LivePane(VerticalScroll, can_focus=False):
    # Priority: the step table, which has the keys, would take them first.
    BINDINGS = [Binding("x", "app.cancel_run", "Cancel run", id="live.cancel"),
                Binding("pagedown", "pane_page(True)", "Page the pane down", show=False, priority=True),
                Binding("pageup", "pane_page(False)", "Page the pane up", show=False, priority=True),
                Binding("end", "pane_edge(True)", "Bottom of the pane, last step", show=False, priority=True),
                Binding("home", "pane_edge(False)", "Top of the pane, first step", show=False, priority=True)]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.record: RunRecord | None = None
        self.started: float | None = None
        self.ended: float | None = None
        self._rows = 0
        self._table_at = 0.0

    def compose(self) -> ComposeResult:
        yield Static("no run yet: press 1 for the launch form", id="live-header")
        yield Static("", id="live-status")
        yield Static("", id="live-queue", classes="queue")  # runs waiting their turn; hidden when none
        yield Static("", id="live-ranks")  # a data-parallel job's ranks; hidden otherwise
        with Horizontal(id="live-body"):
            with Vertical(id="live-left"):
                yield StepChart(self.glyphs, id="chart")
                yield ConsoleTable(id="steps", cursor_type="row", zebra_stripes=True)
            with Vertical(id="live-right"):
                yield StatsPanel(id="stats")
                yield GpuPanel(self.glyphs, id="gpu")

    def on_mount(self) -> None:
        self.query_one("#live-ranks", Static).display = False
        self.query_one("#live-queue", Static).display = False
        t = self.query_one("#steps", DataTable)
        # Five narrow columns fit the 46 cells left of the stats at 80 columns, so a train step's
        # phases add up in view; a warm-up step is marked in its index ("w0") instead of a column.
        for col in ("step", "total ms", "fwd ms", "bwd ms", "opt ms"):
            t.add_column(col, key=col)

    def on_resize(self) -> None:
        """The status's start line is cut to the pane's width: a run shown while the pane was hidden (picked in
        Runs), or a terminal resized, draws it again at the width it has now."""
        if self.record is not None:
            self.refresh_status()

    def action_pane_page(self, down: bool) -> None:
        """Page the pane while it can move that way; at its edge (or when it fits) the step table pages."""
        if not (self.scroll_y < self.max_scroll_y if down else self.scroll_y > 0):
            raise SkipAction()
        (self.scroll_page_down if down else self.scroll_page_up)(animate=False)

    def action_pane_edge(self, end: bool) -> None:
        """The pane to its bottom (top), then the step table to its last (first) row as well."""
        (self.scroll_end if end else self.scroll_home)(animate=False)
        raise SkipAction()

    def show_record(self, record: RunRecord | None, started: float | None = None,
                    ended: float | None = None) -> None:
        """Show another run from scratch (a new launch, or a run picked in the runs list)."""
        self.record, self.started, self.ended = record, started, ended
        self._rows = 0
        self._table_at = 0.0
        self.query_one("#steps", DataTable).clear()
        self.refresh_record()

    def show_queue(self, text: str) -> None:
        box = self.query_one("#live-queue", Static)
        box.update(text)
        box.display = bool(text)

    def mark_ended(self, when: float) -> None:
        self.ended = when
        self.refresh_status()

    def refresh_record(self) -> None:
        r = self.record
        if r is None:
            return
        self.query_one("#live-header", Static).update(Text(spec_header(r), style="bold"), layout=False)
        self.query_one("#chart", StepChart).set_steps(r.warmup_steps, r.steps)
        # New rows change the table's size and cost a layout pass, so while steps stream they are
        # added once a second; chart and stats keep up at the app's redraw rate.
        now = time.monotonic()
        if r.finished or now - self._table_at >= TABLE_PERIOD_S:
            self._table_at = now
            table = self.query_one("#steps", DataTable)
            all_steps = sorted([*r.warmup_steps, *r.steps], key=lambda s: s.index)
            for s in all_steps[self._rows:]:
                table.add_row(*self._step_cells(s))
            if len(all_steps) > self._rows and table.row_count:
                table.move_cursor(row=table.row_count - 1)
            self._rows = len(all_steps)
        summary = r.summary if r.finished and r.summary else r.recompute_summary()
        self.query_one("#stats", StatsPanel).show(summary)
        self._show_ranks(r)
        self.refresh_status()

    def _show_ranks(self, r: RunRecord) -> None:
        """One line for the job (core.reports.parallel) and one row per rank: its median and last step,
        its time in collectives, the steps in which it was the slowest, its overlap once profiled."""
        box = self.query_one("#live-ranks", Static)
        line = job_line(r)
        box.display = line is not None
        if line is None:
            return
        t = Text(line, style="dim")

        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:,.2f}"
        for row in rank_rows(r):
            # A rank's own comm is there only where its steps timed it; the job's line has the job's.
            comm = "" if row["comm_ms"] is None else f" · comm {ms(row['comm_ms'])} ms" + (
                "" if row["comm_share"] is None else f" ({row['comm_share']:.0%})")
            t.append(f"\nrank {row['rank']}: median {ms(row['median_ms'])} ms · last {ms(row['last_ms'])} ms"
                     f"{comm} · slowest in {row['slowest_in']}")
            if row["overlap_share"] is not None:
                t.append(f" · NCCL overlap {row['overlap_share']:.0%}")
        box.update(t)

    @staticmethod
    def _step_cells(s: Step) -> list[Text]:
        def ms(v: float | None) -> Text:
            return Text("-" if v is None else f"{v:,.3f}", justify="right")
        return [Text(f"w{s.index}" if s.warmup else str(s.index), justify="right", style="dim" if s.warmup else ""),
                ms(s.total_ms), ms(s.forward_ms), ms(s.backward_ms), ms(s.optimizer_ms)]

    def refresh_status(self) -> None:
        r = self.record
        if r is None:
            return
        t = Text()
        t.append(STATUS_WORDS.get(r.status, r.status), style=STATUS_STYLE.get(r.status, ""))
        rep = r.replicates[-1] if r.replicates else None
        done = len(rep.steps) if rep is not None else len(r.steps)
        warm = rep.warmup_steps if rep is not None else r.warmup_steps
        if r.status in ("running", "pending"):
            if r.stage or r.status == "running":
                t.append(f" · {r.stage or 'building'}")
            if rep is not None:
                t.append(f" · process {rep.index + 1}/{r.spec.repeat}")
            if warm and not done and len(warm) < r.spec.warmup:
                t.append(f" · warm-up {len(warm)}/{r.spec.warmup}")
            else:
                t.append(f" · step {done}/{r.spec.steps}")
        elif r.replicates:
            t.append(f" · {len(r.steps)} measured steps in {len(r.replicates)}/{r.spec.repeat} processes")
        elif r.status == "imported":
            t.append(" · its tables are in Kernels (3) and NVTX (4)")
        else:
            t.append(f" · {done}/{r.spec.steps} measured steps")
        if self.started is not None:
            end = self.ended if self.ended is not None else time.monotonic()
            t.append(f" · {duration(end - self.started)}")
        flagged = flag_text(Telemetry.from_dict(r.telemetry)) if r.telemetry else None
        if flagged:
            t.append(f"\n{flagged}", style="yellow")
        taken = host_flag(r.host, r.spec.steps) if r.host else None
        if taken:
            t.append(f"\n{taken}", style="yellow")
        if r.error is not None and r.status != "ok":
            t.append(f"\n{r.error.text()}", style="red")
        elif r.status == "running":
            t.append(" · x cancels", style="dim")
        box = self.query_one("#live-status", Static)
        if r.start:  # where the start went, the status's last line (below any flag or error): one line, cut to fit
            width = box.size.width
            line = Text(start_line(r.start, r.compile_cache, width) if width else start_text(r.start, r.compile_cache),
                        style="dim")
            if width:
                line.truncate(width, overflow="ellipsis")
            t.append("\n")
            t.append_text(line)
        box.update(t, layout=False)

    def show_gpu(self, sample: GpuSample | None, history: tuple[GpuSample, ...],
                 others: tuple[GpuSample, ...] = ()) -> None:
        self.query_one("#gpu", GpuPanel).show(sample, history, others)

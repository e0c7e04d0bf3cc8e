"""The Timeline pane: when the run's kernels ran (core.timeline), a row a GPU stream, its copies, its nested
ranges (host and GPU side) and, on request, the host's CUDA launches; one lane group per rank of a data-parallel
job. Keys move a window (core.timeline.view) and select a kernel or an idle gap; Enter opens the Kernels pane
filtered to the selected kernel. The trace is read in a thread the first time the pane shows a run."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static, TabbedContent

from perfconsole.core.record import RunRecord
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.form_input import FormInput

if TYPE_CHECKING:  # core.timeline holds numpy: imported where a timeline is read or drawn, not as the console starts
    from perfconsole.core.timeline.model import Timeline
    from perfconsole.core.timeline.view import View


class TimelinePane(Vertical, can_focus=True):
    BINDINGS = [
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom", id="timeline.zoom_in", key_display="+"),
        Binding("minus", "zoom(2)", "Out", id="timeline.zoom_out", key_display="-"),
        Binding("left", "pan(-1)", "Pan left", show=False, id="timeline.pan_left"),
        Binding("right", "pan(1)", "Pan right", show=False, id="timeline.pan_right"),
        Binding("n,right_square_bracket", "kernel(1)", "Next kernel", id="timeline.next_kernel", key_display="n"),
        Binding("N,left_square_bracket", "kernel(-1)", "Previous kernel", show=False, id="timeline.previous_kernel"),
        Binding("g", "gap(1)", "Gap", id="timeline.next_gap"),
        Binding("G", "gap(-1)", "Previous gap", show=False, id="timeline.previous_gap"),
        Binding("f", "fit_step", "Fit step", id="timeline.fit_step"),
        Binding("s", "goto_step", "Step N", id="timeline.goto_step", priority=True),
        Binding("a", "fit_all", "All", show=False, id="timeline.all"),
        Binding("up", "lane(-1)", "Lane up", show=False, id="timeline.lane_up"),
        Binding("down", "lane(1)", "Lane down", show=False, id="timeline.lane_down"),
        Binding("l", "launches", "Launches", show=False, id="timeline.launches"),
        Binding("enter", "open_kernel", "Kernels", show=False, id="timeline.kernels"),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.ascii_only = glyphs is not UNICODE
        self.record: RunRecord | None = None
        self.view: View | None = None
        self.message = "no run selected: pick one with a torch trace in Runs (5, then t) or launch one (1)"
        self._loaded_for: str | None = None
        self._cache: dict[str, Timeline] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="timeline-title", classes="title")
        yield Static("", id="timeline-rows")
        yield Static("", id="timeline-detail")
        yield FormInput(placeholder="go to step (Enter)", compact=True, id="timeline-step")

    def on_mount(self) -> None:
        self.query_one("#timeline-step", Input).display = False
        tabs = next((a for a in self.ancestors if isinstance(a, TabbedContent)), None)
        if tabs is not None:  # read the trace when the tab is shown, not each time a run is viewed
            self.watch(tabs, "active", self._tab_changed, init=False)
        self.draw()

    def _shown(self) -> bool:
        tabs = next((a for a in self.ancestors if isinstance(a, TabbedContent)), None)
        return tabs is None or tabs.active == "timeline"

    def _tab_changed(self, active: str) -> None:
        if active == "timeline" and self.record is not None:
            self.load()

    # --- the run -----------------------------------------------------------------------------------------
    def show_record(self, record: RunRecord | None) -> None:
        self.record = record
        if record is None or record.id != self._loaded_for:
            self.view = None
            self._loaded_for = None
        if record is None:
            self.message = "no run selected: pick one with a torch trace in Runs (5, then t) or launch one (1)"
        elif self._shown():
            self.load()
        self.draw()

    def load(self) -> None:
        record = self.record
        if record is None or self._loaded_for == record.id:
            return
        self._loaded_for = record.id
        if record.id in self._cache:
            self._ready(record.id, self._cache[record.id])
            return
        self.message = f"{record.name}: reading its trace"
        self.draw()
        self._read(record)

    @work(thread=True, exclusive=True, group="timeline", exit_on_error=False)
    def _read(self, record: RunRecord) -> None:
        from perfconsole.core.timeline.load import load_timeline
        from perfconsole.core.timeline.model import TimelineError
        from perfconsole.core.timeline.source import record_traces

        try:
            traces = record_traces(record)
            tl = load_timeline([t for _, t in traces], [r for r, _ in traces])
        except TimelineError as exc:
            self.app.call_from_thread(self._failed, record.id, str(exc))
            return
        self.app.call_from_thread(self._ready, record.id, tl)

    def _failed(self, rid: str, message: str) -> None:
        if self.record is not None and self.record.id == rid:
            self.message = message
            self.draw()

    def _ready(self, rid: str, tl: Timeline) -> None:
        from perfconsole.core.timeline.view import View

        self._cache[rid] = tl
        if self.record is not None and self.record.id == rid:
            self.view = View(tl)
            self.draw()

    # --- drawing -----------------------------------------------------------------------------------------
    def _cells(self) -> int:
        return max(10, self._width() - self._label_width() - 2)

    def _width(self) -> int:
        return self.size.width or self.app.size.width

    def _label_width(self) -> int:
        if self.view is None:
            return 12
        many = len(self.view.tl.ranks) > 1
        return max([len(lane.label) + 3 * many for lane in self.view.tl.lanes_of(None, self.view.launches)] + [6]) + 1

    def draw(self) -> None:
        if not self.is_mounted:
            return
        title = self.query_one("#timeline-title", Static)
        rows = self.query_one("#timeline-rows", Static)
        detail = self.query_one("#timeline-detail", Static)
        v = self.view
        if v is None:
            title.update(self.message)
            rows.update("")
            detail.update("")
            return
        from perfconsole.core.timeline.render import STYLES
        from perfconsole.core.timeline.captions import legend

        width = self._cells()
        frame = v.frame(width, self.ascii_only)
        name = self.record.name if self.record else ""
        title.update(f"{name}: {v.title(width)}")
        lw = self._label_width()
        text = Text()
        for row in frame.rows:
            mark = row.lane == v.lane
            text.append(f"{'>' if mark else ' '}{row.label:<{lw - 1}} ", style="bold" if mark else "")
            for i, (ch, cat) in enumerate(zip(row.text, row.cats)):
                chosen = row.selected is not None and row.selected[0] <= i < row.selected[1]
                text.append(ch, style=("reverse " if chosen else "") + STYLES.get(cat, ""))
            text.append("\n")
        text.append(f"{'t (' + frame.unit + ')':<{lw}} {frame.axis}")
        rows.update(text)
        room = self._width() - 1
        lines = [*v.details(), legend(self.ascii_only)]   # one line each, cut: a C++ kernel name runs to 500 characters
        detail.update(Text("\n".join(line if len(line) <= room else line[:room - 1] + ("~" if self.ascii_only else "…") for line in lines)))

    def on_resize(self) -> None:
        self.draw()

    # --- keys --------------------------------------------------------------------------------------------
    def _act(self, fn, *args) -> None:
        if self.view is None:
            self.app.notify(self.message, severity="warning")
            return
        from perfconsole.core.timeline.model import TimelineError

        try:
            fn(*args)
        except (ValueError, TimelineError) as exc:
            self.app.notify(str(exc), severity="warning")
        self.draw()

    def action_zoom(self, factor: float) -> None:
        self._act(lambda: self.view.zoom(factor))

    def action_pan(self, quarters: int) -> None:
        self._act(lambda: self.view.pan(quarters))

    def action_kernel(self, delta: int) -> None:
        self._act(lambda: self.view.next_kernel(delta) or self.app.notify("no more kernels on this lane"))

    def action_gap(self, delta: int) -> None:
        self._act(lambda: self.view.next_gap(delta) or self.app.notify("no more idle gaps of 10 us or more"))

    def action_lane(self, delta: int) -> None:
        self._act(lambda: self.view.next_lane(delta))

    def action_fit_step(self) -> None:
        self._act(lambda: self.view.fit_step())

    def action_fit_all(self) -> None:
        self._act(lambda: self.view.fit_all())

    def action_launches(self) -> None:
        self._act(lambda: setattr(self.view, "launches", not self.view.launches))

    def action_goto_step(self) -> None:
        if self.view is None:
            self.app.notify(self.message, severity="warning")
            return
        box = self.query_one("#timeline-step", Input)
        steps = len(self.view.tl.rank(self.view.rank).steps)
        box.placeholder = f"go to step 1-{steps} (Enter; Esc leaves)"
        box.display = True
        self.screen.set_focus(box)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # `s` typed in the step field is text
        return action != "goto_step" or self.screen.focused is not self.query_one("#timeline-step")

    @on(Input.Submitted, "#timeline-step")
    def _step_typed(self, event: Input.Submitted) -> None:
        event.stop()
        box = self.query_one("#timeline-step", Input)
        text = box.value.strip()
        box.value, box.display = "", False
        self.focus()
        if not text.isdigit():
            self.app.notify(f"step {text!r}: a step number", severity="warning")
            return
        self._act(lambda: self.view.fit_step(int(text)))

    def action_open_kernel(self) -> None:
        k = self.view.kernel if self.view is not None else None
        if k is None:
            self.app.notify("select a kernel first (n)", severity="warning")
            return
        kernels = self.app.query_one("#kernels-pane")   # it shows the same run: viewing a run shows it in both
        kernels.query_one("#kernel-filter", Input).value = k.name
        self.app.action_show_tab("kernels")

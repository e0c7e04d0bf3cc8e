"""The console app: eight panes in tabs, keys, help, the command palette and the session's runs.

Background work follows harlequin: each thread is an exclusive `@work(thread=True)` worker that only
posts typed messages (messages.py); the UI folds them into RunRecords. The run thread lives in
run_driver.py, the NVML thread in gpu_sampling.py, the session's actions (save, open, export,
compare) in actions.py. Nothing here imports torch: the model runs in the worker process that
core.launch.launcher starts.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from pathlib import Path

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.widgets import TabbedContent, TabPane

from perfconsole.core.launch import launcher, warm
from perfconsole.core.launch.interleave import InterleavedRuns
from perfconsole.core.launch.queue import RunQueue
from perfconsole.core.launch.replicates import RepeatedLaunch
from perfconsole.core.telemetry import nvml
from perfconsole.core.telemetry.nvml import GpuSample
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.tui import exit_guard
from perfconsole.tui import glyphs as gl
from perfconsole.tui.actions import SessionActions
from perfconsole.tui.gpu_sampling import GpuSampling
from perfconsole.tui.ladder_driver import LadderDriver
from perfconsole.tui.messages import RunFeed
from perfconsole.tui.run_driver import RunDriver
from perfconsole.tui.saved_items import SavedItems
from perfconsole.tui.session import Session
from perfconsole.tui.panes.compare import ComparePane
from perfconsole.tui.panes.grids import GridsPane
from perfconsole.tui.panes.launch import LaunchPane, LaunchRequested
from perfconsole.tui.panes.live import LivePane
from perfconsole.tui.panes.profile_tables import KernelsPane, NvtxPane
from perfconsole.tui.panes.runs import RunsPane
from perfconsole.tui.panes.timeline import TimelinePane
from perfconsole.tui.screens.console_screen import ConsoleScreen
from perfconsole.tui.screens.dialogs import ConfirmScreen, HelpScreen
from perfconsole.tui.widgets.footer import ConsoleFooter
from perfconsole.tui.widgets.sortable_table import SortableTable

LEAVE_S = 1.5    # how long a stopping console waits for its runs' last events before it saves and exits
TABS = (("launch", "1 Launch"), ("live", "2 Live"), ("kernels", "3 Kernels"), ("nvtx", "4 NVTX"),
        ("runs", "5 Runs"), ("compare", "6 Compare"), ("grids", "7 Grids"), ("timeline", "8 Timeline"))


class AsciiScrollBarRender(ScrollBarRender):
    VERTICAL_BARS = [" "] * 8
    HORIZONTAL_BARS = [" "] * 8


class PerfConsole(RunDriver, LadderDriver, GpuSampling, SessionActions, SavedItems, App[int]):
    TITLE = "perfconsole"
    CSS_PATH = Path(__file__).with_name("console.tcss")  # absolute: subclasses may live anywhere
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        # The tab titles show these keys ("1 Launch"), so the footer keeps its room for the pane's keys.
        # Not priority bindings: a digit typed after a key the focused widget still holds (Enter on a run, which
        # shows Live) must act after it, as typed.
        *(Binding(str(i + 1), f"show_tab('{tab}')", label.split(" ", 1)[1], show=False, id=f"tab.{tab}")
          for i, (tab, label) in enumerate(TABS)),
        Binding("question_mark", "help", "Keys", id="app.help"),
        Binding("q", "quit_console", "Quit", id="app.quit"),
        Binding("ctrl+q", "quit_console", "Quit", show=False, priority=True, id="app.quit_now"),
        Binding("ctrl+k", "cancel_run", "Cancel run", show=False, id="app.cancel"),
        # Fields would take ctrl+c as "copy" and say nothing: a user pressing it wants out, so say how.
        Binding("ctrl+c", "quit_hint", "How to quit", show=False, priority=True, id="app.ctrl_c"),
        # The screen's own Tab binding runs only after the key has gone down to the focused field and
        # bubbled back, by which time the keys typed after it (a burst: tmux send-keys, typing over SSH)
        # have already gone to the old field ("3 Tab 4" gave 34). As priority bindings the app moves the
        # focus before it hands on the next key.
        Binding("tab", "focus_next", "Next field", show=False, priority=True, id="app.focus_next"),
        Binding("shift+tab", "focus_previous", "Previous field", show=False, priority=True, id="app.focus_previous"),
    ]

    def __init__(self, prefill: RunSpec | None = None, start: bool = False, ascii_only: bool = False,
                 sampler: Callable[[int], GpuSample | None] = nvml.sample,
                 launch_env: dict[str, str] | None = None, snapshots: Iterable[Path] = ()) -> None:
        super().__init__()
        self.prefill = prefill or RunSpec(device="cpu")
        self.start_at_once = start
        self.glyphs = gl.choose(ascii_only)
        self.ascii_only = self.glyphs is gl.ASCII
        if self.ascii_only:
            self.add_class("-ascii")  # here, before any widget is styled: at mount it restyled every one
        self.sampler = sampler
        self.launch_env = launch_env
        self.initial_snapshots = list(snapshots)
        self.session = Session()                 # the runs, grids, saved comparisons, their files, marks (tui/session.py)
        self.times: dict[str, list[float | None]] = {}
        self.feeds: dict[str, RunFeed] = {}
        self.queue = RunQueue()
        self.launch: launcher.Launch | RepeatedLaunch | InterleavedRuns | Any | None = None  # Any: a LadderRunner
        self.group: set[str] = set()             # ids of an interleaved entry's runs not yet ended
        self.active: RunRecord | None = None     # the run streaming now
        self.executor: Any = None                # core.launch.slurm.SlurmExecutor: the ladder's rungs as Slurm jobs
        self.grid_jobs: dict[str, dict[str, int]] = {}   # grid id -> its Slurm jobs pending, running, done
        self._stop = threading.Event()
        self._gpu_busy = False                   # sample fast only while it matters (dolphie)
        self.first_frame_at: float | None = None
        self._redraw_pending = False
        self.install_signals = False             # the real console only; tests keep pytest's handlers
        self.warm_start = False                  # keep a warm process for the runs (core.launch.warm; tui/main.py)
        self.exit_guard: exit_guard.ExitGuard | None = None  # the real console's watchdog (tui/main.py)
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        self.stop_signal: int | None = None     # the stop signal (or hang-up) that ends this console
        self._stopping = False
        self.kept: list[Path] = []               # the files leaving wrote (tui/main.py names them on exit)

    # --- layout --------------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return ConsoleScreen()

    def compose(self) -> ComposeResult:
        g = self.glyphs
        with TabbedContent(initial="launch", id="tabs"):
            with TabPane(TABS[0][1], id="launch"):
                yield LaunchPane(self.prefill, id="launch-pane")
            with TabPane(TABS[1][1], id="live"):
                yield LivePane(g, id="live-pane")
            with TabPane(TABS[2][1], id="kernels"):
                yield KernelsPane(g, id="kernels-pane")
            with TabPane(TABS[3][1], id="nvtx"):
                yield NvtxPane(g, id="nvtx-pane")
            with TabPane(TABS[4][1], id="runs"):
                yield RunsPane(g, id="runs-pane")
            with TabPane(TABS[5][1], id="compare"):
                yield ComparePane(g, id="compare-pane")
            with TabPane(TABS[6][1], id="grids"):
                yield GridsPane(g, id="grids-pane")
            with TabPane(TABS[7][1], id="timeline"):
                yield TimelinePane(g, id="timeline-pane")
        # Compact: at 80 columns every pane's keys and ? q stay in view; the palette hint draws a "▏".
        yield ConsoleFooter(show_command_palette=not self.ascii_only)

    def on_mount(self) -> None:
        if self.install_signals:
            self.install_stop_signals()
        if self.warm_start:  # here, on the main thread: the warm process's parent-death signal follows it
            warm.start_own()
        if self.ascii_only:
            # Textual draws scrollbar ends with block characters; ASCII mode draws them as spaces in
            # the thumb's colour (Textual's documented hook; put back on unmount for the next app).
            self._scrollbar_renderer, ScrollBar.renderer = ScrollBar.renderer, AsciiScrollBarRender
        for path in self.initial_snapshots:
            self.open_path(path, switch=False)
        self.refresh_runs()
        self.load_saved_snapshots()
        self.sample_gpu()
        self.set_interval(1.0, self._tick)
        self.call_after_refresh(self._first_frame)
        self.main("#f-size").focus()
        if self.start_at_once:
            pane = self.launch_pane
            if pane.spec is not None:
                self.enqueue([pane.spec], queue=False)
            else:
                self.notify("--start: the form is not valid, fix it and press ctrl+r", severity="error")

    def _first_frame(self) -> None:
        self.first_frame_at = time.monotonic()

    def on_unmount(self) -> None:
        self._stop.set()
        self.end_runs()  # a ladder's thread must not start its next rung's process after this
        if self._stopping:
            self.save_measured()
        if self.ascii_only:
            ScrollBar.renderer = self._scrollbar_renderer
        if self.warm_start:  # after the runs' ends: it kills whatever it forked that still runs
            warm.stop_own()

    def main(self, selector):
        """A widget of the main screen, also while a dialog is on top (App.query_one searches the top screen)."""
        return self.screen_stack[0].query_one(selector)

    # The panes, for the drivers: typed, and named once here (posting's accessors).
    @property
    def tabs(self) -> TabbedContent:
        return self.main(TabbedContent)

    @property
    def launch_pane(self) -> LaunchPane:
        return self.main(LaunchPane)

    @property
    def live_pane(self) -> LivePane:
        return self.main(LivePane)

    @property
    def kernels_pane(self) -> KernelsPane:
        return self.main(KernelsPane)

    @property
    def nvtx_pane(self) -> NvtxPane:
        return self.main(NvtxPane)

    @property
    def runs_pane(self) -> RunsPane:
        return self.main(RunsPane)

    @property
    def compare_pane(self) -> ComparePane:
        return self.main(ComparePane)

    @property
    def grids_pane(self) -> GridsPane:
        return self.main(GridsPane)

    # --- tabs and keys -------------------------------------------------------------------------
    FOCUS = {"launch": "#f-size", "live": "#steps", "kernels": "#kernel-table", "nvtx": "#nvtx-table", "runs": "#runs-table",
             "compare": "#compare-pane", "grids": "#grids-pane", "timeline": "#timeline-pane"}

    def action_show_tab(self, tab: str) -> None:
        self.tabs.active = tab
        self._focus_tab(tab)
        self.call_after_refresh(self._focus_tab, tab, True)  # again once shown, in case it was not focusable yet

    def _focus_tab(self, tab: str, again: bool = False) -> None:
        main = self.screen_stack[0]
        if again and main.focused is not None and self.tabs.get_pane(tab) in main.focused.ancestors:
            return  # a key typed since (`/` right after `3`) has moved the focus within the tab: keep it there
        main.set_focus(self.main(self.FOCUS[tab]))

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._gpu_busy = event.pane.id == "live" or self.active is not None

    def action_help(self) -> None:
        sections = [("Everywhere", self.BINDINGS)]
        for title, cls in (("Launch form", LaunchPane), ("Live run", LivePane), ("Kernels", KernelsPane),
                           ("NVTX", NvtxPane), ("Kernel and NVTX tables", SortableTable), ("Runs", RunsPane),
                           ("Compare", ComparePane), ("Grids", GridsPane), ("Timeline", TimelinePane)):
            sections.append((title, cls.BINDINGS))
        rows = [(title, [(b.key.replace("question_mark", "?").replace("slash", "/"), b.description)
                         for b in bindings if isinstance(b, Binding)]) for title, bindings in sections]
        rows[0][1].append(("ctrl+p", "Command palette: every action by name"))
        self.push_screen(HelpScreen(rows))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for tab, label in TABS:
            yield SystemCommand(f"Show {label.split(' ', 1)[1]}", f"switch to the {tab} pane",
                                lambda t=tab: self.action_show_tab(t))
        pane = self.launch_pane
        commands = [
            ("Run the launch form", "start the run the form describes", pane.action_launch),
            ("Queue the launch form", "run it after the runs ahead of it", pane.action_enqueue),
            ("Queue fp32, bf16 and fp16", "the form's config once per precision", pane.action_enqueue_ladder),
            ("Run the optimization ladder", "the form's size, ctx, batch and precision, a process per rung",
             self.action_run_ladder),
            ("Cancel the run", "end the running benchmark, keep its steps", self.action_cancel_run),
            ("Clear the queue", "drop the runs waiting in the queue", self.action_clear_queue),
            ("Mark / unmark the run", "mark runs to compare", self.action_toggle_mark),
            ("Compare marked runs", "two or more marked runs side by side", self.action_compare),
            ("Save the run", "write a snapshot to the data directory", self.action_save_run),
            ("Open a snapshot", "a saved run or comparison, or a shipped example", self.action_open_snapshot),
            ("Import a profile", "nsys CSVs or log, nvprof log, torch trace, ncu CSV pages or report, as a run",
             self.action_import_profile),
            ("Export the run", "Markdown, CSV or JSON", self.action_export_run),
            ("Delete the run", "remove it from the list", self.action_delete_run),
            ("Export the comparison", "Markdown, CSV or JSON", self.action_export_comparison),
            ("Save the comparison", "write a snapshot to the data directory", self.action_save_comparison),
            ("Switch grid values", "step time / tokens/s / peak memory; fwd/bwd ms / memory",
             self.grids_pane.action_next_metric),
            ("Export the grid", "the sweep or attention grid as Markdown, CSV or JSON", self.action_export_grid),
            ("Save the grid", "write the sweep or attention grid to the data directory", self.action_save_grid),
            ("Show all keys", "every binding of every pane", self.action_help),
            ("Quit perfconsole", "ends any run first", self.action_quit_console),
        ]
        for title, help_text, fn in commands:
            yield SystemCommand(title, help_text, fn)

    # --- launching -----------------------------------------------------------------------------
    @on(LaunchRequested)
    def _launch_requested(self, event: LaunchRequested) -> None:
        self.enqueue(event.specs, event.queue, event.interleave)

    # --- showing runs --------------------------------------------------------------------------
    def show_current(self) -> None:
        r = self.session.current
        t = self.times.get(r.id) if r else None
        self.live_pane.show_record(r, t[0] if t else None, t[1] if t else None)
        self.kernels_pane.show_record(r)
        self.nvtx_pane.show_record(r)
        self.main(TimelinePane).show_record(r)

    def refresh_runs(self) -> None:
        s = self.session
        self.runs_pane.show_runs(s.runs, s.marked, s.files, s.grids, s.comparisons)

    # --- quitting: q, ctrl+q and the palette leave as a stop signal does, keeping every run -----------
    def action_quit_console(self) -> None:
        if self.launch is None:
            self.leave(0)
            return
        climbing = next((g.name for g in self.session.grids if g.status == "running"), "a ladder")
        what = self.active.name if self.active is not None else climbing

        def answer(yes: bool | None) -> None:
            if yes:
                self.leave(0)

        self.push_screen(ConfirmScreen(f"{what} is running. Quit and end it? Its steps so far are kept. (y/n)"),
                         answer)

    async def action_quit(self) -> None:
        """Textual's own quit (the palette's "Quit the application"): the console's way out, not a bare exit."""
        self.action_quit_console()

    def action_quit_hint(self) -> None:
        running = " (it asks first while a run is going; ctrl+k cancels the run)" if self.launch else ""
        self.notify(f"q or ctrl+q quits{running}", timeout=4)

    # --- stopping: a stop signal, or the terminal or the parent gone (tui/exit_guard.py) ----------
    def install_stop_signals(self) -> None:
        """SIGHUP, SIGTERM and SIGINT stop the console (hang_up). Called before the app runs and again once
        mounted: the web driver puts its own SIGINT/SIGTERM handlers on the loop, which would only quit."""
        if self.exit_guard is None:
            self.exit_guard = exit_guard.ExitGuard()
        guard = self.exit_guard
        guard.rescue, guard.on_lost = self.save_measured, self.request_stop
        with contextlib.suppress(RuntimeError):  # no loop yet: called before the app runs
            self._ui_loop = loop = asyncio.get_running_loop()
            for sig in exit_guard.STOP_SIGNALS:
                loop.remove_signal_handler(sig)
        exit_guard.install_stop_signals(guard, self.request_stop)
        if self._ui_loop is not None and self.stop_signal is not None:
            self.hang_up(self.stop_signal)  # it came before the loop ran

    def request_stop(self, signum: int) -> None:
        """From a signal handler or any thread: have the UI thread stop the console."""
        if self.stop_signal is None:
            self.stop_signal = signum
        if self._ui_loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the process is ending anyway
                self._ui_loop.call_soon_threadsafe(self.hang_up, signum)

    def hang_up(self, signum: int = signal.SIGHUP) -> None:
        """Leave with 128 + signum (129 SIGHUP, 143 SIGTERM, 130 SIGINT). The exit guard, tripped first (also
        when a quit is already leaving), ends the process should leaving stall."""
        code = 128 + signum
        if self.exit_guard is not None:
            self.exit_guard.trip(code)
        self.leave(code)

    def leave(self, code: int) -> None:
        """Every way out (q, ctrl+q, a stop signal, a lost terminal): end every run, save what the session
        measured and has not saved to the data directory, and exit `code`."""
        if self._stopping:
            return
        self._stopping = True
        self.end_runs()
        self.run_worker(self._leave(code), group="stop", exit_on_error=False)

    def _start_next(self, show: bool = False) -> None:
        # Once stopping, nothing starts: a run queued by a key read after the signal would otherwise start
        # when the cancelled one ends, in a process spawned as the console exits (chaos trial "queued").
        if self._stopping:
            self.queue.clear()
            return
        super()._start_next(show)

    def action_run_ladder(self) -> None:
        if not self._stopping:
            super().action_run_ladder()

    async def _leave(self, code: int) -> None:
        # The run threads read what the killed workers wrote before they died; their RunEnded clears launch.
        end = time.monotonic() + LEAVE_S
        while self.launch is not None and time.monotonic() < end:
            await asyncio.sleep(0.05)
        self.save_measured()
        self.exit(code)

    def save_measured(self) -> list[Path]:
        """The session's runs with steps and no file, saved to the data directory (also off the UI thread,
        by the exit guard): a run opened from a file or saved already is not written again."""
        saved = exit_guard.save_measured(self.session)
        self.kept += saved
        return saved

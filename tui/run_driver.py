"""Launching and following runs in the console: the queue, one worker thread per run that reads the
launch's events, folding them into the run's record, redrawing at most four times a second, cancel.

An interleaved entry (specs compared with several processes each) is one worker thread for all its
runs: their processes run in rounds (core.launch.interleave), and the live pane follows the run
whose process is running."""
from __future__ import annotations

import contextlib
import dataclasses
import time

from textual import work
from textual.css.query import NoMatches
from textual.worker import Worker, WorkerState

from perfconsole.core import events as ev
from perfconsole.core.launch import launcher, processes
from perfconsole.core.launch.interleave import InterleavedRuns
from perfconsole.core.launch.replicates import RepeatedLaunch, make_launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.tui.messages import RunEnded, RunFeed, RunUpdated

REDRAW_S = 0.25              # live pane redraws at most 4 times a second, however fast steps come
# The launcher cannot tell a signal from the user; the console knows who cancelled the runs it cancelled.
BY_USER = "stopped by the user before its last step"


class RunDriver:
    """Mixed into the console's App: uses its session (tui/session.py), queue, feeds, times, panes and notify()."""

    user_cancelled: frozenset[str] = frozenset()   # the runs the user cancelled (x, ctrl+k, the palette)

    def enqueue(self, specs: list[RunSpec], queue: bool, interleave: bool = False) -> None:
        if not queue and self.launch is not None:  # a run, or a ladder, holds the GPU
            self.notify("a run is in progress: ctrl+e queues this one, ctrl+k cancels the running one",
                        severity="warning")
            return
        if interleave and len(specs) > 1:
            self.queue.add_interleaved(specs)
        else:
            self.queue.extend(specs)
        self._show_queue()
        if self.launch is None:
            # Run now (ctrl+r) shows Live; queueing (ctrl+e, ctrl+t) keeps the user where they are, in the form,
            # so the keys typed next are the form's, not Live's.
            self._start_next(show=not queue)
            if queue:
                what = f"{len(specs)} runs in rounds" if interleave and len(specs) > 1 else specs[0].label()
                self.notify(f"started {what} (2 shows it)" + (f"; {len(self.queue)} waiting" if len(self.queue) else ""))
        else:
            self.notify(f"queued {len(specs)} run(s); {len(self.queue)} waiting")

    def _show_queue(self) -> None:
        # Live and Runs show it too: the runs lined up with ctrl+e / ctrl+t are not on Launch's mind.
        pending = self.queue.pending()
        text = f"{len(pending)} queued: " + ", ".join(s.label() for s in pending) if pending else ""
        self.launch_pane.set_queue_info(text)
        self.live_pane.show_queue(text)
        self.runs_pane.show_queue(text)

    def action_clear_queue(self) -> None:
        n = self.queue.clear()
        self._show_queue()
        self.notify(f"dropped {n} queued run(s)")

    def end_runs(self) -> None:
        """Quitting: nothing queued starts, the running entry stops, and no process is left."""
        self.queue.clear()
        if self.launch is not None:
            self.launch.cancel()
        processes.kill_all(runs_only=True)  # the warm process, where this console has one, is stopped after

    def _start_next(self, show: bool = False) -> None:
        """Start the next queued entry; with `show`, switch to Live (a run the user asked for now). A run that
        starts when the one before it ends leaves the user on the pane they are on."""
        group = self.queue.pop()
        self._show_queue()
        if group is None:
            return
        records = [RunRecord(spec) for spec in group]
        for record in records:
            self.session.add(record)
        self.active = records[0]
        self.session.show(records[0])
        self._gpu_busy = True
        for record in records:
            self.times[record.id] = [time.monotonic(), None]
            self.feeds[record.id] = RunFeed()
        if len(group) == 1:
            self.launch = make_launch(group[0], env=self.launch_env)
        else:
            self.launch = InterleavedRuns(list(group), env=self.launch_env)
            self.group = {r.id for r in records}
        self.refresh_bindings()
        self.show_current()
        if show:
            self.action_show_tab("live")
        self.refresh_runs()
        if isinstance(self.launch, InterleavedRuns):
            self.drive_interleaved([r.id for r in records], self.launch)
        else:
            self.drive_run(records[0].id, self.launch, self.feeds[records[0].id])

    @work(thread=True, exclusive=True, exit_on_error=False, group="run")
    def drive_interleaved(self, run_ids: list[str], runner: InterleavedRuns) -> None:
        feeds = [self.feeds[i] for i in run_ids]

        def on_event(i: int, event: ev.Event) -> None:
            feeds[i].push(event)
            self.post_message(RunUpdated(run_ids[i]))

        try:
            runner.run(on_event)
        finally:
            for run_id in run_ids:
                self.post_message(RunEnded(run_id))

    @work(thread=True, exclusive=True, exit_on_error=False, group="run")
    def drive_run(self, run_id: str, launch: launcher.Launch | RepeatedLaunch, feed: RunFeed) -> None:
        try:
            for event in launch.events():
                feed.push(event)
                self.post_message(RunUpdated(run_id))
        finally:
            self.post_message(RunEnded(run_id))

    def _fold(self, run_id: str) -> RunRecord | None:
        record, feed = self.session.run(run_id), self.feeds.get(run_id)
        if record is None or feed is None:
            return None
        events = feed.drain()
        status = record.status
        for event in events:
            if isinstance(event, ev.Error) and event.kind == "cancelled" and record.id in self.user_cancelled:
                event = dataclasses.replace(event, message=BY_USER)
            record.apply(event)
        if not events or self._shutting_down():  # none, or the console is closing: its record took them, no pane
            return None
        if record.id in self.group and record is not self.active and any(isinstance(e, ev.Replicate) for e in events):
            # An interleaved entry moved on to this run's next process: the live pane follows it.
            self.active = record
            self.session.show(record)
            self.show_current()
        if record is self.session.current:
            self._schedule_redraw()
            if any(isinstance(e, ev.ProfileReady) for e in events):
                self.kernels_pane.show_record(record)
                self.nvtx_pane.show_record(record)
        if record.status != status:
            self.refresh_runs()
        return record

    def _shutting_down(self) -> bool:
        """Whether the console is shutting down: Textual stops running before it removes the screens' widgets, and
        removes them before it empties the screen stack, so a run's message handled in between finds no pane."""
        return not self.is_running or not self.screen_stack

    def _schedule_redraw(self) -> None:
        if not self._redraw_pending:
            self._redraw_pending = True
            self.set_timer(REDRAW_S, self._redraw)

    def _redraw(self) -> None:
        self._redraw_pending = False
        with contextlib.suppress(NoMatches, IndexError):  # a timer may fire while the app shuts down
            self.live_pane.refresh_record()

    def on_run_updated(self, message: RunUpdated) -> None:
        self._fold(message.run_id)

    def on_run_ended(self, message: RunEnded) -> None:
        self._fold(message.run_id)
        record = self.session.run(message.run_id)
        if record is not None and not record.finished:
            # The thread stopped without a Finished event (it raised): keep the steps, say so.
            record.apply(ev.Error("crash", "the run stopped unexpectedly; see the notification"))
            record.apply(ev.Finished("error"))
        self.feeds.pop(message.run_id, None)
        now = time.monotonic()
        if message.run_id in self.times:
            self.times[message.run_id][1] = now
        if self._shutting_down():  # the record is whole, and there is no pane to draw it in
            return
        if record is self.session.current:
            live = self.live_pane
            live.mark_ended(now)
            live.refresh_record()
            self.kernels_pane.show_record(record)
            self.nvtx_pane.show_record(record)
        if record is not None:
            sev = "information" if record.status == "ok" else "error"
            self.notify(f"{record.name}: {record.status}" + (f" ({record.error.message})" if record.error and
                                                              record.status != "ok" else ""), severity=sev)
        self.group.discard(message.run_id)
        if self.group:  # the interleaved entry's other runs end with it, just after
            self.refresh_runs()
            return
        self.active, self.launch = None, None
        self.refresh_bindings()
        self._gpu_busy = self.tabs.active == "live"
        self.refresh_runs()
        self._start_next()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.notify(f"{event.worker.name}: {event.worker.error}", severity="error", timeout=15)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The footer offers "x Cancel run" only while a run is under way.
        if action == "cancel_run":
            return self.launch is not None
        return super().check_action(action, parameters)  # type: ignore[misc]

    def action_cancel_run(self) -> None:
        if self.launch is None:
            self.notify("no run in progress")
            return
        self.user_cancelled |= self.group | ({self.active.id} if self.active is not None else set())
        self.launch.cancel()
        if self.active is not None:
            self.active.stage = "cancelling"
            self.live_pane.refresh_status()

    def _tick(self) -> None:
        if self.active is not None and self.active is self.session.current:
            with contextlib.suppress(NoMatches, IndexError):
                self.live_pane.refresh_status()

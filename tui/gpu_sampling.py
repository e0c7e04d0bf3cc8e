"""Sampling the GPU through NVML for the console: one sample at a time on a worker thread, fast while
a run streams or the live pane shows, rarely otherwise (dolphie's rule: polls never overlap)."""
from __future__ import annotations

import collections
import contextlib

from textual import work
from textual.css.query import NoMatches
from textual.worker import get_current_worker

from perfconsole.core.telemetry.nvml import GpuSample, visible_gpus
from perfconsole.tui.messages import GpuSampled

GPU_PERIOD_S = 0.25          # 4 Hz while a run streams or the live pane shows
GPU_IDLE_PERIOD_S = 2.0      # otherwise, and where there is no GPU, poll rarely
GPU_HISTORY = 60


class GpuSampling:
    """Mixed into the console's App: uses its sampler, _stop, _gpu_busy and post_message()."""

    # --- GPU sampling --------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="nvml")
    def sample_gpu(self) -> None:
        """One sample, then the next only after it returned: polls never overlap (dolphie)."""
        worker = get_current_worker()
        history: collections.deque[GpuSample] = collections.deque(maxlen=GPU_HISTORY)
        last: object = object()
        visible = visible_gpus()
        first, rest = (visible[0], visible[1:]) if visible else (0, [])
        while not worker.is_cancelled and not self._stop.is_set():
            sample = self.sampler(first)
            if sample is not None:
                history.append(sample)
            others = tuple(o for o in (self.sampler(i) for i in rest) if o is not None) if sample else ()
            if sample is not None or last is not None:  # "no GPU" is sent once, not four times a second
                self.post_message(GpuSampled(sample, tuple(history), others))
            last = sample
            period = GPU_PERIOD_S if self._gpu_busy and sample is not None else GPU_IDLE_PERIOD_S
            self._stop.wait(period)

    def on_gpu_sampled(self, message: GpuSampled) -> None:
        with contextlib.suppress(NoMatches, IndexError):
            self.live_pane.show_gpu(message.sample, message.history, message.others)

"""The run's statistics as they fill in: mean, std, median and its 95% interval, tokens/s, TFLOP/s, MFU,
fraction of speed of light, the GPU's busy share (with host-bound named), peak memory."""
from __future__ import annotations

from rich.table import Table
from textual.widgets import Static

from perfconsole.core.flops import sol_fraction
from perfconsole.core.stats import median_interval_text
from perfconsole.core.run_summary import Summary, busy_text
from perfconsole.tui.format import NA, num, pct


class StatsPanel(Static):
    DEFAULT_CSS = "StatsPanel { height: 13; }"  # fixed, so an update needs no layout pass

    def show(self, summary: Summary | None) -> None:
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold")
        t.add_column(justify="right")
        if summary is None:
            self.update("no measured steps yet", layout=False)
            return
        st = summary.total_ms
        t.add_row("steps", str(st.n))
        t.add_row("mean", f"{st.mean:,.3f} ms")
        t.add_row("std", f"{st.std:,.3f} ms" if st.n > 1 else NA)  # one step has no spread to measure
        t.add_row("median", f"{st.median:,.3f} ms")
        # The median's 95% interval, under it: "too few steps" below MEDIAN_CI_MIN_N, NA for one step.
        t.add_row("median CI", median_interval_text(st, ",.2f"))
        for name in ("forward_ms", "backward_ms", "optimizer_ms"):
            ph = getattr(summary, name)
            if ph is not None:
                t.add_row(f" {name[:-3]}", f"{ph.mean:,.3f} ms")
        t.add_row("tokens/s", num(summary.tokens_per_s, ",.0f"))
        t.add_row("TFLOP/s", num(summary.achieved_tflops, ",.3f"))
        # MFU and the fraction of speed of light share a row: 13 rows fit beside the GPU panel at 80x24.
        # A step that beat its floor refutes the peaks (core.flops.beaten_text says so in full, in Grids and the CLI).
        sol = "peaks low" if (summary.speed_of_light or {}).get("beaten") else pct(sol_fraction(summary.speed_of_light))
        t.add_row("MFU · SoL", f"{pct(summary.mfu)} · {sol}")
        # The figure with its source (profile, nvml, or events: a lower bound), so no reader takes one for another.
        t.add_row("GPU busy", busy_text(summary.gpu_busy_share, summary.gpu_busy_source, digits=1)
                  + (f" {summary.bound}" if summary.bound == "host-bound" else ""))
        t.add_row("peak mem", num(summary.peak_allocated_mib, ",.0f", " MiB"))
        self.update(t, layout=False)

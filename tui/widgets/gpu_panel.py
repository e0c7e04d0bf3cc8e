"""Live GPU state from NVML with sparklines; says "no GPU" plainly where there is none."""
from __future__ import annotations

from rich.table import Table
from textual.widgets import Static

from perfconsole.core.telemetry.nvml import GpuSample
from perfconsole.tui.format import num
from perfconsole.tui.glyphs import UNICODE, Glyphs, sparkline

SPARK_W = 12


class GpuPanel(Static):
    DEFAULT_CSS = "GpuPanel { height: 7; }"  # fixed, so an update needs no layout pass

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__("GPU: waiting for the first sample", **kw)
        self.glyphs = glyphs

    def show(self, sample: GpuSample | None, history: tuple[GpuSample, ...]) -> None:
        if sample is None:
            self.update("no GPU (NVML found no device)", layout=False)
            return

        def spark(attr: str, lo: float | None = None, hi: float | None = None) -> str:
            vals = [getattr(h, attr) for h in history if getattr(h, attr) is not None]
            return sparkline(vals, SPARK_W, self.glyphs, lo, hi)

        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold")
        t.add_column(justify="right")
        t.add_column(style="green")
        t.add_row("util", num(sample.util_pct, ".0f", "%"), spark("util_pct", 0, 100))
        mem = (f"{sample.mem_used_mib / 1024:,.1f}/{sample.mem_total_mib / 1024:,.0f}G"
               if sample.mem_used_mib is not None and sample.mem_total_mib else "N/A")
        t.add_row("mem", mem, spark("mem_used_mib", 0, sample.mem_total_mib))
        t.add_row("power", num(sample.power_w, ".0f", " W"), spark("power_w"))
        t.add_row("temp", num(sample.temp_c, ".0f", " C"), spark("temp_c"))
        t.add_row("SM clk", num(sample.sm_clock_mhz, ".0f", " MHz"), spark("sm_clock_mhz"))
        grid = Table.grid()
        grid.add_row(f"GPU {sample.index}: {sample.name}")
        grid.add_row(t)
        self.update(grid, layout=False)

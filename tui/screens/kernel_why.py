"""Why one kernel takes its time: Enter on a row of the Kernels table opens this over it. The figures are
core.reports.kernel_why's, the ones `perfconsole kernels RUN.json --why` prints, for the kernel under the cursor,
with every rule Nsight Compute applied to its launches."""
from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from perfconsole.core.profiling.ncu_kernels import first_sentence
from perfconsole.core.profiling.ncu_kernels import kernel_key
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.kernel_why import KernelWhy, kernel_why, peaks_of
from perfconsole.core.reports.roofline import HEIGHT, WIDTH, roofline_lines


def _num(v: Any, fmt: str, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return format(v, fmt) + unit


def figures(row: dict[str, Any], replay: bool = False) -> list[tuple[str, str]]:
    """(label, value with its unit) of one kernel's row, in the order the view shows them. `replay`: the times are
    ncu's replay durations (an import of its pages alone), not a timed program's."""
    share = row["step_share"] * 100 if row.get("step_share") is not None else None
    per, whole, where = ((" ms of ncu replay", " % of all the replay time", "under ncu's replay") if replay else
                         (" ms/step", " % of the step", "in the timed program"))
    return [
        ("time", f"{_num(row['ms_per_step'], ',.3f', per)} ({_num(share, '.1f', whole)}), "
                 f"avg {_num(row['avg_us'], ',.1f', ' us')} a launch {where}"),
        ("could save", f"{_num(row['gain_ms'], ',.3f', per)} (time x (1 - the higher of compute and memory))"),
        ("compute", f"{_num(row['compute_pct'], '.1f', ' %')} of the SMs' peak throughput (ncu)"),
        ("memory", f"{_num(row['memory_pct'], '.1f', ' %')} of peak (ncu), DRAM {_num(row['dram_pct'], '.1f', ' %')}"),
        ("bound", str(row.get("bound") or "-")),
        ("achieved", f"{_num(row['tflops'], ',.1f', ' TFLOP/s')} {row.get('precision') or ''} "
                     f"({_num(row['tflops_pct'], '.1f', ' % of the measured peak')}); "
                     f"{_num(row['gbps'], ',.0f', ' GB/s')} ({_num(row['gbps_pct'], '.1f', ' % of the measured copy')})"),
        ("FLOPs from", f"{row.get('flops_source') or '-'}; ncu's roofline alone reads "
                       f"{_num(row['ncu_roofline_tflops'], ',.2f', ' TFLOP/s')}"),
        ("intensity", f"{_num(row['intensity'], ',.1f', ' FLOP/byte')}, ridge {_num(row['ridge'], ',.1f')}: "
                      f"{row.get('side') or '-'} side"),
        ("occupancy", f"{_num(row['achieved_occupancy_pct'], '.1f', ' %')} achieved, "
                      f"{_num(row['theoretical_occupancy_pct'], '.1f', ' %')} theoretical; "
                      f"{_num(row['registers_per_thread'], '.0f')} registers/thread, "
                      f"{_num(row['waves_per_sm'], '.2f')} waves/SM"),
        ("under ncu", f"{row['configs']} launch configuration(s), {_num(row['duration_us'], ',.1f', ' us')} replayed"),
        ("top rule", f"{row.get('rule') or '-'} (est. {_num(row['rule_speedup_pct'], '.1f', ' %')}): "
                     f"{row.get('rule_text') or ''}"),
        ("bottleneck", str(row.get("bottleneck") or "-")),
    ]


class KernelWhyScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,enter", "close", "Close", id="why.close")]

    def __init__(self, record: RunRecord | None, kernel: str) -> None:
        super().__init__()
        self.record = record
        self.kernel = kernel
        self.why: KernelWhy | None = None  # built once, for the body and the roofline both

    def compose(self) -> ComposeResult:
        self.why = kernel_why(self.record) if self.record is not None else None
        with VerticalScroll(classes="dialog wide", id="why"):
            yield Static(Text(self.kernel, style="bold"), id="why-name")
            yield Static(self._body(), id="why-body")
            yield Static(self._roofline(), id="why-roofline")

    def _body(self) -> Any:
        why = self.why
        if self.record is None or why is None:
            return "no run selected"
        if why.missing:
            return why.missing
        row = why.row(self.kernel)
        if row is None:
            return (f"Nsight Compute did not profile this kernel in {self.record.name}: it profiles the kernels "
                    f"with the most time ({len(why.rows)} here); `perfconsole kernels RUN.json --why` lists them")
        t = Table.grid(padding=(0, 1))
        t.add_column(style="bold cyan", no_wrap=True)
        t.add_column()
        for label, value in figures(row, why.replay):
            t.add_row(label, value)
        rules = [r for r in (self.record.profile.tables.get("ncu_rules") or [])  # type: ignore[union-attr]
                 if kernel_key(r["kernel"]) == row["key"]]
        if rules:
            t.add_row("", "")
            t.add_row("rules", f"{len(rules)} applied by ncu to this kernel's launches:")
            for r in sorted(rules, key=lambda r: -(r.get("speedup_pct") or 0)):
                est = f" est. {r['speedup_pct']:.1f} %" if r.get("speedup_pct") is not None else ""
                t.add_row(f"  {r.get('type') or ''}", f"{r['rule']}{est}: {first_sentence(r.get('text'), 160)}")
        t.add_row("", "")
        for note in why.notes:
            t.add_row("note", note)
        t.add_row("", "Esc, q or Enter closes")
        return t

    def _roofline(self) -> Any:
        """The run's roofline, this kernel drawn as @, as wide as the screen allows (the axes never wrap)."""
        why = self.why
        if self.record is None or why is None:
            return ""
        row = None if why.missing else why.row(self.kernel)
        if row is None:
            return ""
        width = max(24, min(WIDTH, self.app.size.width - 30))
        picture = roofline_lines(why.rows, peaks_of(self.record), ascii_only=getattr(self.app, "ascii_only", False),
                                 highlight=row["key"], width=width, replay=why.replay)
        if not picture:
            return "roofline: no profiled kernel has both counted FLOPs and DRAM bytes"
        axes = HEIGHT + 4  # the y label, the grid, the x axis and its labels
        return Group(Text("roofline (log-log)", style="bold cyan"),
                     Text("\n".join(picture[:axes]), no_wrap=True, overflow="crop"), Text("\n".join(picture[axes:])))

    def action_close(self) -> None:
        self.dismiss(None)

"""Live GPU state from NVML: utilisation, SM clock, power and memory used, each with its last value, unit,
a sparkline of the recent samples and the lowest and highest of them; says "no GPU" plainly where
there is none.

The panel shares a narrow column with the statistics, so it lays itself out for the room it has: two
lines per metric (value and min/max, then a full-width sparkline) where there are nine rows, one line
per metric (value, sparkline, min-max) at 80x24.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group
from rich.text import Text
from textual.events import Resize
from textual.widgets import Static

from perfconsole.core.telemetry.nvml import GpuSample
from perfconsole.tui.glyphs import UNICODE, Glyphs, sparkline

NO_GPU = "no GPU (NVML found no device)"
FALLBACK_SIZE = (33, 9)      # before the first layout, or while the live tab is hidden
MIN_SPARK = 4


@dataclass(frozen=True)
class Metric:
    attr: str
    label: str
    unit: str


METRICS = (Metric("util_pct", "util", "%"), Metric("sm_clock_mhz", "SM", "MHz"), Metric("power_w", "power", "W"),
           Metric("mem_used_mib", "mem", "MiB"))
LABEL_W = max(len(m.label) for m in METRICS)
VALUE_W = 10                  # "40,000 MiB"


def _num(v: float) -> str:
    return f"{v:,.0f}"


def _compact(lo: float, hi: float) -> tuple[str, str]:
    """A min and a max in a few characters: 38,210 and 41,022 MiB read as 38k and 41k (40.1k and
    40.3k where whole thousands would make them look equal)."""
    if max(abs(lo), abs(hi)) < 10_000:
        return f"{lo:.0f}", f"{hi:.0f}"
    digits = 0 if f"{lo / 1000:.0f}" != f"{hi / 1000:.0f}" else 1
    return f"{lo / 1000:.{digits}f}k", f"{hi / 1000:.{digits}f}k"


def range_labels(lo: float, hi: float, unit: str) -> list[str]:
    """The lowest and highest recent values, most explicit first; the caller takes the first that fits."""
    clo, chi = _compact(lo, hi)
    return [f"min {_num(lo)} max {_num(hi)} {unit}", f"{_num(lo)}-{_num(hi)} {unit}", f"{clo}-{chi} {unit}",
            f"{clo}-{chi}"]


def _scale(m: Metric, vals: list[float], sample: GpuSample) -> tuple[float | None, float | None]:
    """What the sparkline spans: utilisation and memory have a natural scale (0-100 %, 0-total)."""
    if m.attr == "util_pct":
        return 0.0, 100.0
    if m.attr == "mem_used_mib":
        return 0.0, sample.mem_total_mib
    lo, hi = min(vals), max(vals)
    # A flat history drawn against its own range would sit on the floor and read as "idle".
    return (0.0, hi) if hi <= lo else (lo, hi)


class GpuPanel(Static):
    DEFAULT_CSS = "GpuPanel { height: 9; }"  # the console's stylesheet sizes it to its column

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__("GPU: waiting for the first sample", **kw)
        self.glyphs = glyphs
        self.sample: GpuSample | None = None
        self.history: tuple[GpuSample, ...] = ()
        self.others: tuple[GpuSample, ...] = ()
        self._shown = False

    def show(self, sample: GpuSample | None, history: tuple[GpuSample, ...],
             others: tuple[GpuSample, ...] = ()) -> None:
        self.sample, self.history, self.others, self._shown = sample, history, others, True
        self.update(self.panel(*self._room()), layout=False)

    def on_resize(self, _event: Resize) -> None:
        if self._shown:
            self.update(self.panel(*self._room()), layout=False)

    def _room(self) -> tuple[int, int]:
        w, h = self.size.width, self.size.height
        return (w, h) if w > 0 and h > 0 else FALLBACK_SIZE

    def panel(self, width: int, height: int) -> Text | Group:
        """What the panel shows in `width` x `height` cells."""
        s = self.sample
        if s is None:
            return Text(NO_GPU)
        width = max(width, 24)
        # Every other GPU gets one line at the bottom; the first keeps the rest of the panel.
        extra = [self._other_line(o, width) for o in self.others][:max(0, height - 1 - len(METRICS))]
        height -= len(extra)
        head = Text(f"GPU {s.index}: {s.name}", no_wrap=True, overflow="ellipsis")
        if s.temp_c is not None:
            head.append(f" {s.temp_c:.0f} C", style="dim")
        head.truncate(width, overflow="ellipsis")
        series = [self._series(m) for m in METRICS]
        if height >= 1 + 2 * len(METRICS):
            # Every metric's min and max in the same form: the most explicit one that fits them all.
            room = width - LABEL_W - 1 - VALUE_W - 2
            choices = [range_labels(min(v), max(v), m.unit) if v else [""] * 4 for m, v in zip(METRICS, series)]
            k = next((k for k in range(4) if all(len(c[k]) <= room for c in choices)), 3)
            lines = [head] + [line for m, vals, c in zip(METRICS, series, choices)
                              for line in self._two_lines(m, vals, c[k], width)]
        else:
            # Below five rows the metrics matter more than the device's name.
            lines = ([head] if height > len(METRICS) else []) + self._one_line_each(series, width)
        if height > len(lines) and s.mem_total_mib:
            lines.append(Text(f"memory total {_num(s.mem_total_mib)} MiB", style="dim"))
        return Group(*lines, *extra)

    @staticmethod
    def _other_line(o: GpuSample, width: int) -> Text:
        def v(x: float | None, unit: str) -> str:
            return "N/A" if x is None else f"{_num(x)}{unit}"
        line = Text(f"GPU {o.index} ", style="bold", no_wrap=True, overflow="ellipsis")
        line.append(f"util {v(o.util_pct, '%')} mem {v(o.mem_used_mib, ' MiB')} {v(o.power_w, ' W')}")
        line.truncate(width, overflow="ellipsis")
        return line

    def _series(self, m: Metric) -> list[float]:
        """The metric's recent values, oldest first; at least the current one where it has one."""
        vals = [v for v in (getattr(h, m.attr) for h in self.history) if v is not None]
        current = getattr(self.sample, m.attr)
        return vals or ([current] if current is not None else [])

    def _value(self, m: Metric) -> Text:
        current = getattr(self.sample, m.attr)
        line = Text(no_wrap=True, overflow="crop")
        line.append(f"{m.label:<{LABEL_W}} ", style="bold")
        line.append(f"{'N/A' if current is None else f'{_num(current)} {m.unit}':>{VALUE_W}}")
        return line

    def _spark(self, m: Metric, vals: list[float], width: int) -> str:
        lo, hi = _scale(m, vals, self.sample)  # type: ignore[arg-type]
        return sparkline(vals, width, self.glyphs, lo, hi).ljust(width)

    def _two_lines(self, m: Metric, vals: list[float], label: str, width: int) -> list[Text]:
        """The value with min and max on the right, then a sparkline across the whole width."""
        line = self._value(m)
        if not vals:
            return [line, Text("")]
        line.append(" " * max(1, width - line.cell_len - len(label)) + label, style="dim")
        return [line, Text(self._spark(m, vals, width), style="green", no_wrap=True)]

    def _one_line_each(self, series: list[list[float]], width: int) -> list[Text]:
        """Value, sparkline, min-max on one line each; the sparklines share one width so they line up."""
        ranges = [range_labels(min(v), max(v), "")[-1] if v else "" for v in series]
        range_w = max(map(len, ranges))
        spark_w = max(MIN_SPARK, width - LABEL_W - 1 - VALUE_W - 2 - range_w)
        out = []
        for m, vals, rng in zip(METRICS, series, ranges):
            line = self._value(m)
            if vals:
                line.append(" " + self._spark(m, vals, spark_w), style="green")
                line.append(f" {rng:>{range_w}}", style="dim")
            out.append(line)
        return out

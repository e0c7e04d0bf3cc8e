"""The run's profile as sortable tables: Kernels (with category, filters and category-share bars) and
NVTX ranges (pick one to see the kernels inside it). Rows, categories and shares are views of the record's
profile loaded once (core.profiling.loaded): showing a record again, or another range, builds no frame twice."""
from __future__ import annotations

import dataclasses

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Static

from perfconsole.core.profiling.lazy_imports import numpy as np
from perfconsole.core.profiling.categories import CATEGORIES
from perfconsole.core.profiling.loaded import LoadedProfile, loaded_of
from perfconsole.core.profiling.ncu_summary import REPLAY_NOTE, REPLAY_WORDS
from perfconsole.core.record import RunRecord
from perfconsole.core.reports.profile import headline
from perfconsole.tui.format import shorten
from perfconsole.tui.widgets.choice_field import ChoiceField
from perfconsole.tui.widgets.form_input import FormInput
from perfconsole.tui.glyphs import UNICODE, Glyphs
from perfconsole.tui.widgets.category_bars import CategoryBars
from perfconsole.tui.widgets.sortable_table import Column, FrameFilter, SortableTable

KERNELS = "cuda_gpu_kern_sum"
NVTX = "nvtx_sum"
ALL = "all"


def _ms(v: Any) -> str:
    return f"{v / 1e6:,.3f}"


def _us(v: Any) -> str:
    return f"{v / 1e3:,.1f}"


def _pct(v: Any) -> str:
    return f"{v:.1f}"


# Numbers first: at 80 columns a long kernel name would push them out of view (names are cut last).
KERNEL_COLUMNS = [
    Column("total_time_ns", "total ms", _ms, numeric=True),
    Column("instances", "count", lambda v: f"{v:,}", numeric=True),
    Column("avg_ns", "avg us", _us, numeric=True),
    Column("time_pct", "time %", _pct, numeric=True),
    Column("category", "category", width=13),
    Column("name", "kernel", fill=True),
]
NVTX_COLUMNS = [
    Column("total_time_ns", "total ms", _ms, numeric=True),
    Column("instances", "count", lambda v: f"{v:,}", numeric=True),
    Column("avg_ns", "avg ms", _ms, numeric=True),
    Column("time_pct", "time %", _pct, numeric=True),
    Column("style", "style"),
    Column("range", "range", fill=True),
]
RANGE_KERNEL_COLUMNS = [
    Column("total_ns", "total ms", _ms, numeric=True),
    Column("instances", "count", lambda v: f"{v:,}", numeric=True),
    Column("share", "share %", lambda v: f"{v * 100:.1f}", numeric=True),
    Column("category", "category", width=13),
    Column("name", "kernel in range", fill=True),
]


def _loaded(record: RunRecord | None) -> LoadedProfile | None:
    return loaded_of(record.profile) if record is not None and record.profile is not None else None


def _units(record: RunRecord | None) -> str:
    profile = _loaded(record)
    return profile.row_units(record.spec.device) if profile is not None and record is not None else "kernels"


def _no_profile(record: RunRecord | None, table: str) -> str:
    if record is None:
        return "no run selected: pick one in Runs (5) or launch one (1)"
    if record.profile is None:
        profilers = "torch or nsys" if record.spec.device == "cuda" else "torch"  # nsys needs a GPU
        return f"{record.name}: no profile (launch with profiler {profilers}, or import nsys CSVs)"
    return f"{record.name}: the profile has no {table} table"


class FilterKey:
    """`/` moves to the pane's text filter (FILTER, a selector): a priority binding, and the focus moved at once, so
    the keys typed in a burst right after `/` (tmux send-keys, typing over SSH) are the filter's, not the table's
    (`b` hid the bars); inside the filter `/` is text."""
    FILTER = ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action != "focus_filter" or self.screen.focused is not self.query_one(self.FILTER)  # type: ignore[attr-defined]

    def action_focus_filter(self) -> None:
        self.screen.set_focus(self.query_one(self.FILTER, Input))  # type: ignore[attr-defined]


class KernelsPane(FilterKey, Vertical):
    FILTER = "#kernel-filter"
    BINDINGS = [
        Binding("slash", "focus_filter", "Filter", id="kernels.filter", priority=True),  # FilterKey
        Binding("g", "next_category", "Category", id="kernels.category"),
        Binding("b", "toggle_bars", "Bars", id="kernels.bars"),
    ]

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.title_text = ""
        self.one = "kernel"  # what one row is: a kernel, or a CPU run's CPU op
        self._names_lower: Any = None

    def compose(self) -> ComposeResult:
        yield Static("", id="kernels-title", classes="title")
        with Horizontal(classes="filters"):
            yield FormInput(placeholder="filter kernels by text (/)", compact=True, id="kernel-filter")
            yield ChoiceField((ALL, *CATEGORIES), ALL, id="kernel-category")
        yield SortableTable(KERNEL_COLUMNS, self.glyphs, id="kernel-table")
        yield CategoryBars(self.glyphs, id="kernel-bars")

    def show_record(self, record: RunRecord | None) -> None:
        self.record = record
        profile = _loaded(record)
        rows = profile.rows(KERNELS) if profile is not None else []
        title = self.query_one("#kernels-title", Static)
        replay = bool(rows and profile is not None and profile.replay)  # ncu's pages alone
        units = _units(record)
        text = (f"{record.name}: {len(rows)} {units} ({record.profile.profiler}"
                f"{f', {REPLAY_WORDS}' if replay else ''})" if rows and record else _no_profile(record, KERNELS))
        if rows and record:
            line = (f"{REPLAY_NOTE}; Enter on a kernel: why it takes its time" if replay else
                    headline(record.profile, record.summary, len(record.steps) or None))
            text += f"\n{line}" if line else ""
        self.title_text = text
        title.update(text)
        # A CPU run's rows are CPU ops: the table's head, its filter and its empty line say so, as the title does.
        self.one = "CPU op" if units == "CPU ops" else "kernel"
        table = self.query_one("#kernel-table", SortableTable)
        total = dataclasses.replace(KERNEL_COLUMNS[0], label="replay ms") if replay else KERNEL_COLUMNS[0]
        table.cols = [total, *KERNEL_COLUMNS[1:-1], dataclasses.replace(KERNEL_COLUMNS[-1], label=self.one)]
        self.query_one("#kernel-filter", Input).placeholder = f"filter {units} by text (/)"
        self._names_lower = None
        self.query_one("#kernel-table", SortableTable).set_rows(profile.kernels() if profile is not None else [])
        self.query_one("#kernel-bars", CategoryBars).show(profile.category_shares() if profile is not None else [])

    @on(Input.Changed, "#kernel-filter")
    @on(ChoiceField.Changed, "#kernel-category")
    def _filter(self) -> None:
        text = self.query_one("#kernel-filter", Input).value.strip().lower()
        cat = self.query_one("#kernel-category", ChoiceField).value

        def keep(frame: Any) -> Any:
            mask = np.ones(len(frame), dtype=bool)
            if text:
                if self._names_lower is None or len(self._names_lower) != len(frame):
                    self._names_lower = frame["name"].astype("str").str.lower()  # once per table, not per key
                mask &= self._names_lower.str.contains(text, regex=False).to_numpy(dtype=bool)
            if cat != ALL:
                mask &= (frame["category"] == cat).to_numpy(dtype=bool)
            return mask

        table = self.query_one("#kernel-table", SortableTable)
        table.set_filter(FrameFilter(keep) if text or cat != ALL else None)
        empty = not table.shown and bool(table.rows_all)
        what = " and ".join(w for w in (f"'{text}'" if text else "", f"category {cat}" if cat != ALL else "") if w)
        # The way out names only what is set: the text filter, the category, or both.
        ways = [w for w, on in (("clear the text: /, then delete it", text), ("g: the next category", cat != ALL)) if on]
        self.query_one("#kernels-title", Static).update(
            self.title_text + (f"\nno {self.one} matches {what} ({'; '.join(ways)})" if empty else ""))

    @on(DataTable.CellSelected, "#kernel-table")
    def _why(self) -> None:  # Enter on a kernel: Nsight Compute's reasons (tui.screens.kernel_why)
        from perfconsole.tui.screens.kernel_why import KernelWhyScreen

        row = self.query_one("#kernel-table", SortableTable).current_row()
        if row:
            self.app.push_screen(KernelWhyScreen(getattr(self, "record", None), row["name"]))

    @on(Input.Submitted, "#kernel-filter")
    def _done_filtering(self) -> None:
        self.query_one("#kernel-table", SortableTable).focus()

    def action_next_category(self) -> None:
        sel = self.query_one("#kernel-category", ChoiceField)
        options = (ALL, *CATEGORIES)
        sel.value = options[(options.index(sel.value) + 1) % len(options)]

    def action_toggle_bars(self) -> None:
        bars = self.query_one("#kernel-bars")
        bars.display = not bars.display


class NvtxPane(FilterKey, Vertical):
    FILTER = "#nvtx-filter"
    BINDINGS = [Binding("slash", "focus_filter", "Filter", id="nvtx.filter", priority=True)]  # FilterKey

    def __init__(self, glyphs: Glyphs = UNICODE, **kw) -> None:
        super().__init__(**kw)
        self.glyphs = glyphs
        self.record: RunRecord | None = None
        self.filter_text = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="nvtx-title", classes="title")
        yield FormInput(placeholder="filter ranges by text (/)", compact=True, id="nvtx-filter")
        yield SortableTable(NVTX_COLUMNS, self.glyphs, id="nvtx-table")
        yield Static("", id="range-title", classes="title")
        yield SortableTable(RANGE_KERNEL_COLUMNS, self.glyphs, id="range-kernels")

    def show_record(self, record: RunRecord | None) -> None:
        self.record = record
        profile = _loaded(record)
        rows = profile.rows(NVTX) if profile is not None else []
        ncu_only = bool(record and profile is not None and profile.rows("ncu_kernels") and record.status == "imported")
        self.query_one("#nvtx-title", Static).update(
            f"{record.name}: {len(rows)} NVTX ranges; move the cursor to a range to see its {_units(record)}"
            if rows and record else
            f"{record.name}: Nsight Compute's pages hold no NVTX ranges (ranges come from an nsys capture or a torch "
            "trace imported beside them); its kernels are in Kernels (3)" if ncu_only and record else
            _no_profile(record, NVTX))
        frame = profile.frame(NVTX) if profile is not None else None
        self.query_one("#nvtx-table", SortableTable).set_rows(frame if frame is not None else [])
        self._show_range(None)

    def _show_range(self, range_name: str | None) -> None:
        profile = _loaded(self.record)
        title = self.query_one("#range-title", Static)
        kernels = self.query_one("#range-kernels", SortableTable)
        if range_name is None:
            table = self.query_one("#nvtx-table", SortableTable)
            empty = self.filter_text and table.rows_all and not table.shown
            title.update(f"no range matches '{self.filter_text}'" if empty else "")
            kernels.set_rows([])
            return
        units = _units(self.record)
        # The table's head says what its rows are, as the title above it does: a CPU run's are CPU ops.
        one = "CPU op" if units == "CPU ops" else "kernel"
        kernels.cols = [*RANGE_KERNEL_COLUMNS[:-1], dataclasses.replace(RANGE_KERNEL_COLUMNS[-1], label=f"{one} in range")]
        if profile is None or not profile.rows("nvtx_kern_sum"):
            title.update(f"{range_name}: no nvtx_kern_sum table, so {units} cannot be tied to ranges")
            kernels.set_rows([])
            return
        top = profile.top_kernels(range_name, n=200)
        title.update(f"{units} in {shorten(range_name, 50)}: {len(top.kernels)}, {top.total_ns / 1e6:,.3f} ms")
        kernels.set_rows([k.to_dict() for k in top.kernels])

    @on(DataTable.CellHighlighted, "#nvtx-table")
    def _range_picked(self) -> None:
        row = self.query_one("#nvtx-table", SortableTable).current_row()
        self._show_range(row.get("range") if row else None)

    @on(Input.Changed, "#nvtx-filter")
    def _filter(self, event: Input.Changed) -> None:
        text = event.value.strip().lower()
        table = self.query_one("#nvtx-table", SortableTable)
        self.filter_text = text
        table.set_filter(FrameFilter(lambda f: f["range"].astype("str").str.contains(text, case=False, regex=False)
                                     .to_numpy(dtype=bool)) if text else None)
        row = table.current_row()
        self._show_range(row.get("range") if row else None)

    @on(Input.Submitted, "#nvtx-filter")
    def _done_filtering(self) -> None:
        self.query_one("#nvtx-table", SortableTable).focus()

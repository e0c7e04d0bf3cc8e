"""`perfconsole ladder`'s table, on a terminal and into a pipe, for a ladder whose rungs were picked with --rungs:
a rung that carries a left-out rung's change names it, and its ratio over the rung above says what it includes."""
from __future__ import annotations

from rich.console import Console

from perfconsole.core import store
from perfconsole.core.cli.ladder import ladder_table
from perfconsole.core.grids.ladder import LadderRecord, LadderSpec
from helpers import FIXTURES


def _picked(names: tuple[str, ...]) -> LadderRecord:
    recorded = store.load(FIXTURES / "ladders" / "ladder_tiny_cpu.json")
    runs = dict(zip(recorded.spec.rungs, recorded.runs))
    return LadderRecord(LadderSpec(recorded.spec.base, names), [runs[n] for n in names])


def test_the_table_names_a_left_out_rung_s_change_on_the_rung_that_carries_it():
    """`--rungs eager,sdpa,fused-adamw` on the CPU: the fused-AdamW rung also ran compiled, and the table said
    nothing of it beside its vs prev."""
    table = ladder_table(_picked(("eager", "sdpa", "fused-adamw")))
    piped = table.plain().splitlines()
    fused = next(line for line in piped if line.startswith("4 "))
    assert fused.split("\t")[0] == "4 fused-adamw +compile" and fused.split("\t")[4] == "3.91x slower"
    assert next(line for line in piped if line.startswith("2 ")).split("\t")[0] == "2 sdpa"
    assert "# 4 fused-adamw's vs prev is over 2 sdpa, so it includes compile's change too" in piped
    assert "# +name after a rung: a rung left out, whose change it carries too" in piped
    console = Console(width=80, force_terminal=True, color_system=None, record=True)
    console.print(table)
    shown = console.export_text()
    assert "4 fused-adamw +compile" in shown and "includes compile's change too" in " ".join(shown.split())
    whole = ladder_table(store.load(FIXTURES / "ladders" / "ladder_tiny_cpu.json")).plain()
    assert "+name" not in whole and "+compile" not in whole and "vs prev is over" not in whole

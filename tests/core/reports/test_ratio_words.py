"""A speedup below 1 is said as a slowdown ("2.44x slower"), never as a fraction, in every report and table."""
from __future__ import annotations

import math
import re
from dataclasses import replace

from perfconsole.core import store
from perfconsole.core.cli.ladder import ladder_table
from perfconsole.core.reports import attention, ladder, sweep
from perfconsole.core.stats import ratio_text
from helpers import ROOT

FRACTION = re.compile(r"(?<![\d.,])0\.\d+x")      # "0.41x", not "10.41x" nor "1.0x"


def test_one_rule_for_a_ratio_of_times():
    assert ratio_text(1 / 2.44, faster=False) == "2.44x slower" and ratio_text(1.25, faster=False) == "1.25x"
    assert ratio_text(1 / 2.44) == "2.44x slower" and ratio_text(1.25) == "1.25x faster"
    assert ratio_text(None) == "-" and ratio_text(math.nan) == "-"


def test_a_sweep_says_a_slowdown_as_one():
    sw = store.load(ROOT / "snapshots" / "tiny-cpu-sweep.json")      # bf16 on a CPU: slower than fp32
    found = "\n".join(sweep.findings(sw))
    md = sweep.markdown(sw)
    assert not FRACTION.search(found) and not FRACTION.search(md), (found, FRACTION.findall(md))
    assert "tiny 2.47x slower" in found                                   # was "tiny 0.41x"
    assert "x slower** |" in md
    gpu = store.load(ROOT / "tests" / "fixtures" / "grids" / "sweep_train_fp32_bf16.json")
    assert "small 1.12x, medium 1.42x" in "\n".join(sweep.findings(gpu))   # a speedup keeps its plain form
    assert not FRACTION.search(sweep.markdown(gpu))


def test_a_ladder_says_a_slowdown_as_one():
    rec = store.load(ROOT / "tests" / "fixtures" / "ladders" / "ladder_tiny_cpu.json")
    md = ladder.markdown(rec)
    table = ladder_table(rec).plain()
    assert not FRACTION.search(md) and not FRACTION.search(table), (FRACTION.findall(md), table)
    assert "x slower" in md and "x slower" in table


def test_attention_says_a_slowdown_as_one():
    a = store.load(ROOT / "tests" / "fixtures" / "grids" / "attention_compile.json")
    a.spec = replace(a.spec, impls=tuple(reversed(a.spec.impls)))       # sdpa the baseline: the rest slower
    text = attention.markdown(a)
    found = "\n".join(attention.findings(a))
    assert not FRACTION.search(found) and not FRACTION.search(text), (found, FRACTION.findall(text))
    assert "x slower" in found and "x slower**" in text

"""Two grid snapshots of the same cells side by side, as Markdown, so a change in how cells are run
(e.g. --start-ahead) can be shown to change no figure: for attention grids the forward and backward
means (ms) and their ratios, for sweeps the step mean (ms) and its ratio.
Usage: python3 docs/results/probes/compare_grids.py A.json B.json [--timeline FILE]
"""
from __future__ import annotations

import argparse
import sys

from perfconsole.core import store
from perfconsole.core.grids.attention import AttentionRecord
from perfconsole.core.grids.sweep import SweepRecord


def _ms(stat) -> str:
    return "-" if stat is None else f"{stat.mean:.3f}"


def _ratio(a, b) -> str:
    return "-" if a is None or b is None else f"{b.mean / a.mean:.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--timeline", help="a log whose lines give each grid's wall time")
    args = p.parse_args(argv)
    a, b = store.load(args.a), store.load(args.b)
    if not (type(a) is type(b) and isinstance(a, (AttentionRecord, SweepRecord))):
        print("both files must be attention grid snapshots, or both sweep snapshots", file=sys.stderr)
        return 2
    env = a.environment
    print(f"# {a.name}: A = {args.a.rsplit('/', 1)[-1]}, B = {args.b.rsplit('/', 1)[-1]}\n")
    print(f"- device: {env.get('gpu_name') or env.get('device')}; torch {env.get('torch')}, CUDA {env.get('cuda')}")
    print(f"- A status {a.status}, B status {b.status}")
    if args.timeline:
        with open(args.timeline, encoding="utf-8") as f:
            for line in f:
                if "wall" in line:
                    print(f"- {line.strip()}")
    if isinstance(a, SweepRecord):
        _sweep_rows(a, b)
    else:
        _attention_rows(a, b)
    return 0


def _pairs(a_cells, b_cells, key):
    """The cells of A with their counterpart in B (same key), in A's order."""
    by_b = {key(c): c for c in b_cells}
    return [(c, by_b[key(c)]) for c in a_cells if key(c) in by_b]


def _attention_rows(a: AttentionRecord, b: AttentionRecord) -> None:
    print("\n| impl | d | seq | fwd A (ms) | fwd B (ms) | B/A | bwd A (ms) | bwd B (ms) | B/A | status A | status B |")
    print("| :-- | --: | --: | --: | --: | --: | --: | --: | --: | :-- | :-- |")
    for ca, cb in _pairs(a.cells, b.cells, lambda c: c.cell.label()):
        print(f"| {ca.cell.variant} | {ca.cell.d} | {ca.cell.seq} | {_ms(ca.forward_ms)} | {_ms(cb.forward_ms)} | "
              f"{_ratio(ca.forward_ms, cb.forward_ms)} | {_ms(ca.backward_ms)} | {_ms(cb.backward_ms)} | "
              f"{_ratio(ca.backward_ms, cb.backward_ms)} | {ca.status} | {cb.status} |")


def _sweep_rows(a: SweepRecord, b: SweepRecord) -> None:
    print("\n| cell | step A (ms) | step B (ms) | B/A | status A | status B |")
    print("| :-- | --: | --: | --: | :-- | :-- |")
    for ra, rb in _pairs(a.runs, b.runs, lambda r: r.spec.label()):
        sa = ra.summary.total_ms if ra.summary and ra.steps else None
        sb = rb.summary.total_ms if rb.summary and rb.steps else None
        print(f"| {ra.spec.label()} | {_ms(sa)} | {_ms(sb)} | {_ratio(sa, sb)} | {ra.status} | {rb.status} |")


if __name__ == "__main__":
    sys.exit(main())

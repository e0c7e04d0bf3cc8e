"""Python's garbage collector for a process whose imports are done: the console, the warm process, a worker,
a test session.

What a process has imported by then (torch and its compiler stack: some 280,000 objects) lives as long as it, yet
every full pass of the collector walks it again, and a young pass runs every 700 allocations of Python objects:
a console mounted under test spent a quarter of its CPU in the collector. `settle` freezes what exists (moved
out of the collector's sight; `gc.freeze`, which is also what keeps a forked child from copying the pages its
parent's objects lie on) and lets young passes wait for 50,000 allocations. `space` does the second alone,
before the imports: torch and its compiler stack took 5.07 CPU-s to import with Python's thresholds and 4.50
with these, and 4.55 against 4.33 in a second set (means of 3 and 5 runs taking turns, a 2-core machine).
Nothing is freed later that reference counting frees now: only cycles wait longer, and they are still
collected."""
from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 20)   # young, middle, old: allocations, then passes of the generation below


def space() -> None:
    """Space the collector's passes: first thing in a process about to import torch."""
    gc.set_threshold(*THRESHOLDS)


def settle() -> None:
    """Freeze every object that exists now and space the collector's passes (see the module's text)."""
    gc.freeze()
    space()

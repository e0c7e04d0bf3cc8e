"""A queue of run specs that run one after another, as a user lines up fp32, bf16 and fp16 of a config.

Only one run uses the GPU at a time, so timings never overlap. The queue holds specs, not processes:
whoever drives it (the console) takes the next entry when the previous one has finished. An entry is
one spec, or specs to be compared, whose replicate processes run in rounds (A1 B1 A2 B2 ...;
core.launch.interleave), so drift over the minutes hits every side alike.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from perfconsole.core.settings import PRECISIONS, RunSpec


class RunQueue:
    def __init__(self, specs: Iterable[RunSpec] = ()) -> None:
        self._pending: deque[tuple[RunSpec, ...]] = deque()
        self.extend(specs)

    def add(self, spec: RunSpec) -> None:
        self._pending.append((spec.validate(),))

    def extend(self, specs: Iterable[RunSpec]) -> None:
        for spec in specs:
            self.add(spec)

    def add_interleaved(self, specs: Iterable[RunSpec]) -> None:
        """Specs whose processes run in rounds, as one entry; one spec alone is a plain entry."""
        group = tuple(spec.validate() for spec in specs)
        if group:
            self._pending.append(group)

    def pop(self) -> tuple[RunSpec, ...] | None:
        """The next entry to run (one spec, or specs to interleave), or None when the queue is empty."""
        return self._pending.popleft() if self._pending else None

    def clear(self) -> int:
        n = len(self.pending())
        self._pending.clear()
        return n

    def pending(self) -> list[RunSpec]:
        return [spec for group in self._pending for spec in group]

    def __len__(self) -> int:
        return len(self._pending)


def precision_ladder(spec: RunSpec, precisions: Iterable[str] = PRECISIONS) -> list[RunSpec]:
    """The same config once per precision (fp32, then bf16, then fp16), each validated."""
    return [spec.with_(precision=p).validate() for p in precisions]

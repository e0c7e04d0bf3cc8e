"""A queue of run specs that run one after another, as a user lines up fp32, bf16 and fp16 of a config.

Only one run uses the GPU at a time, so timings never overlap. The queue holds specs, not processes:
whoever drives it (the console) takes the next spec when the previous run has finished.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from perfconsole.core.spec import PRECISIONS, RunSpec


class RunQueue:
    def __init__(self, specs: Iterable[RunSpec] = ()) -> None:
        self._pending: deque[RunSpec] = deque()
        self.extend(specs)

    def add(self, spec: RunSpec) -> None:
        self._pending.append(spec.validate())

    def extend(self, specs: Iterable[RunSpec]) -> None:
        for spec in specs:
            self.add(spec)

    def pop(self) -> RunSpec | None:
        """The next spec to run, or None when the queue is empty."""
        return self._pending.popleft() if self._pending else None

    def clear(self) -> int:
        n = len(self._pending)
        self._pending.clear()
        return n

    def pending(self) -> list[RunSpec]:
        return list(self._pending)

    def __len__(self) -> int:
        return len(self._pending)


def precision_ladder(spec: RunSpec, precisions: Iterable[str] = PRECISIONS) -> list[RunSpec]:
    """The same config once per precision (fp32, then bf16, then fp16), each validated."""
    return [spec.with_(precision=p).validate() for p in precisions]

"""Several launches run one after another behind the face of one `Launch` (a job's one-process baseline
then the job; a plain run then its capture under a profiler): its pid, cancel, kill and discard reach the
launch running now, and a cancel is remembered so the next one in line never starts."""
from __future__ import annotations

from typing import Any


class LaunchSequence:
    current: Any          # the launch running now (or next)
    _cancelled: bool = False

    @property
    def pid(self) -> int | None:
        return self.current.pid

    def cancel(self) -> None:
        self._cancelled = True
        self.current.cancel()

    def kill(self) -> None:
        self._cancelled = True
        self.current.kill()

    def discard(self) -> None:
        self._cancelled = True
        self.current.discard()

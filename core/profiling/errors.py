"""Exceptions of the profiling package, each rendering as one line a user can act on."""
from __future__ import annotations


class ProfileError(Exception):
    """Nothing usable could be read from a profile input."""


class ProfileFormatError(ProfileError):
    """Malformed profiler output at a known place: str() is `path:line: message`."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path, self.line, self.message = str(path), line, message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class NsysError(ProfileError):
    """nsys failed, or none of its reports could be read."""

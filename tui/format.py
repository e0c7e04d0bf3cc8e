"""Number formatting shared by the screens: one place decides how a missing value looks."""
from __future__ import annotations

NA = "-"


def num(v: float | None, fmt: str = ",.2f", unit: str = "") -> str:
    return NA if v is None else f"{format(v, fmt)}{unit}"


def pct(v: float | None, digits: int = 1) -> str:
    return NA if v is None else f"{v:.{digits}%}"


def ns_ms(v: float | None) -> str:
    return NA if v is None else f"{v / 1e6:,.3f}"


def duration(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}:{s:02d}"


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."

"""The characters the console draws with: Unicode blocks where the terminal can show them, ASCII otherwise.

Plain consoles (a serial line, an old PuTTY, LANG=C) garble block characters, so `--ascii` or a
non-UTF-8 locale switches every chart, bar and sparkline to characters any terminal can draw.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Glyphs:
    full: str          # a filled cell in charts and bars
    empty: str         # an unfilled cell in bars
    warmup: str        # a warm-up step's cell in the step chart
    spark: str         # sparkline levels, lowest first
    mark: str          # a marked run in the runs list
    up: str            # sort direction markers
    down: str
    check_on: str      # a checkbox that is on / off: they differ in shape, not only in colour
    check_off: str
    # The step chart's forward, backward and optimizer cells, then a step's time outside them: colour tells
    # them apart where there is colour, and in ASCII (a plain console may have none) their shape does too.
    phases: str


UNICODE = Glyphs(full="█", empty="·", warmup="░", spark="▁▂▃▄▅▆▇█", mark="●", up="▲", down="▼",
                  check_on="[✓]", check_off="[ ]", phases="████")
ASCII = Glyphs(full="#", empty=".", warmup=":", spark="_.-=+*#@", mark="*", up="^", down="v",
                check_on="[x]", check_off="[ ]", phases="#=+-")


def _locale_name(env: dict[str, str]) -> str:
    """The character-type locale the user chose: LC_ALL, else LC_CTYPE, else LANG (POSIX's order).

    Python turns a C locale into UTF-8 for itself (PEP 538 sets LC_CTYPE=C.UTF-8; PEP 540's UTF-8 mode
    makes stdout UTF-8), so neither stdout's encoding nor that LC_CTYPE says what the terminal draws.
    """
    if env.get("LC_ALL"):
        return env["LC_ALL"]
    ctype, lang = env.get("LC_CTYPE", ""), env.get("LANG", "")
    if ctype == "C.UTF-8" and lang in ("C", "POSIX"):  # coerced from the user's C locale
        return lang
    return ctype or lang


def terminal_supports_unicode(env: dict[str, str] | None = None) -> bool:
    name = _locale_name(dict(os.environ) if env is None else env)
    if name:
        return "utf" in name.lower()
    return "utf" in (getattr(sys.stdout, "encoding", None) or "").lower()  # no locale set at all


def choose(ascii_only: bool) -> Glyphs:
    return ASCII if ascii_only or not terminal_supports_unicode() else UNICODE


def sparkline(values: list[float], width: int, glyphs: Glyphs, lo: float | None = None,
              hi: float | None = None) -> str:
    """The last `width` values as one line of level characters, scaled to [lo, hi]."""
    vals = values[-width:]
    if not vals:
        return ""
    lo = min(vals) if lo is None else lo
    hi = max(vals) if hi is None else hi
    span = hi - lo
    levels = glyphs.spark
    out = []
    for v in vals:
        frac = 0.0 if span <= 0 else min(1.0, max(0.0, (v - lo) / span))
        out.append(levels[round(frac * (len(levels) - 1))])
    return "".join(out)


def bar(fraction: float, width: int, glyphs: Glyphs) -> str:
    n = round(min(1.0, max(0.0, fraction)) * width)
    return glyphs.full * n + glyphs.empty * (width - n)

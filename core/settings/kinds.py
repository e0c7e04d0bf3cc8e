"""The kinds of value a setting takes: a flag, one of its choices, an integer, a number or empty, a text, the
model's KEY=VALUE pairs. Each kind parses a setting's text into its value, with the one message that the CLI
and the launch form both show for text it refuses, prints a value back as text, and gives the keyword
arguments of the setting's flag (core.cli.spec_args). The form picks each row's widget by its kind
(tui.panes.launch).

A setting's kind comes from its annotation and its choices (`kind_from`), unless its declaration names one.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from perfconsole.model.sources import ModelError, parse_args

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


def split_pairs(text: str) -> tuple[str, ...]:
    """`KEY=VALUE,KEY=VALUE` (commas or spaces between pairs) as a tuple of its pairs."""
    return tuple(p for p in text.replace(",", " ").split() if p)


def _argtype(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` as argparse's `type`: its message, not argparse's own, after `argument --flag:`."""
    def parsed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parsed


@dataclass(frozen=True)
class Kind:
    """A kind of value: `parse` (text to value, ValueError with what is allowed), `show` (value to text),
    `arguments` (argparse's keywords for the setting's flag)."""

    def parse(self, text: str) -> Any:
        return text.strip()

    def show(self, value: Any) -> str:
        return "" if value is None else str(value)

    def arguments(self, default: Any, metavar: str | None) -> dict[str, Any]:
        return {"type": _argtype(self.parse), "default": default, "metavar": metavar}


@dataclass(frozen=True)
class Flag(Kind):
    """True or false: a box on the form, a flag without a value on the command line that turns its default."""

    def parse(self, text: str) -> bool:
        word = text.strip()
        if word.lower() in TRUE:
            return True
        if word.lower() in FALSE:
            return False
        raise ValueError(f"must be true or false, not {word!r}")

    def show(self, value: Any) -> str:
        return "true" if value else "false"

    def arguments(self, default: Any, metavar: str | None) -> dict[str, Any]:
        return {"action": "store_false" if default else "store_true"}


@dataclass(frozen=True)
class Choice(Kind):
    """One of the setting's declared choices."""
    choices: tuple[str, ...] = ()

    def parse(self, text: str) -> str:
        word = text.strip()
        if word not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}, not {word!r}")
        return word


@dataclass(frozen=True)
class Integer(Kind):
    """A whole number; where the default is None (a custom size's dimensions, the vocabulary) None stands
    for not given, and a text must still be an integer."""

    def parse(self, text: str) -> int:
        word = text.strip()
        try:
            return int(word)
        except ValueError:
            raise ValueError(f"must be an integer, not {word!r}") from None


@dataclass(frozen=True)
class Number(Kind):
    """A number, or empty for None: the library's own or the measured value."""

    def parse(self, text: str) -> float | None:
        word = text.strip()
        if not word:
            return None
        try:
            return float(word)
        except ValueError:
            raise ValueError(f"must be a number or empty, not {word!r}") from None


@dataclass(frozen=True)
class Text(Kind):
    """A text, its surrounding spaces dropped (the model, the size: what they allow is the rules')."""


@dataclass(frozen=True)
class Pairs(Kind):
    """KEY=VALUE pairs, KEY a Python name (model.sources.parse_args): a text holds one or more, between commas
    or spaces; the flag is repeatable, each adding its own."""

    def parse(self, text: str) -> tuple[str, ...]:
        pairs = split_pairs(text)
        try:
            parse_args(pairs)
        except ModelError as exc:
            raise ValueError(str(exc).partition(": ")[2] or str(exc)) from None
        return pairs

    def show(self, value: Any) -> str:
        return ",".join(value)

    def arguments(self, default: Any, metavar: str | None) -> dict[str, Any]:
        return {"action": "extend", "type": _argtype(self.parse), "default": list(default), "metavar": metavar}


def kind_from(annotation: Any, choices: tuple[str, ...] = ()) -> Kind:
    """The kind a field's annotation (a string under `from __future__`) and choices say; TypeError for an
    annotation no kind takes, so a new sort of setting is given its kind where it is declared."""
    t = str(annotation).replace(" ", "")
    if choices:
        return Choice(tuple(choices))
    found = {"bool": Flag, "int": Integer, "int|None": Integer, "float|None": Number, "str": Text,
             "tuple[str,...]": Pairs}.get(t)
    if found is None:
        raise TypeError(f"no kind of value for the annotation {annotation!r}; name one in the declaration")
    return found()

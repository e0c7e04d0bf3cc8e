"""What a run setting is, declared once: `setting()` puts a `Setting` beside a RunSpec field's default, and
everything else is built from those declarations (core.settings holds them).

From one declaration come: the flags of `run`, `compare`, `sweep`, `ladder` and the console
(core.cli.spec_args), `spec_from_args`, the launch form's rows (tui.panes.launch), the run's label,
"the same program" of a saved baseline (core.launch.scaling), the sweep's axes, `compare --vary`, the
rules that need only the spec (checked in `RunSpec.validate`, before any process starts). The code that
applies an optimization to a model is a converter registered under its setting's name by the measuring code
(core.measure.converters): a declaration names no code above the vocabulary. A command whose defaults differ from
`run`'s says so as data (`Command.defaults`), and its help prints them. The kind of a setting's values
(core.settings.kinds: a flag, a choice, an integer, ...) is `kind_for(field)`: its flag's type, the form's
widget and the parsing of its text on both come from it.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from perfconsole.core.settings.kinds import Kind, kind_from

# The sections of a spec, in the order help and the form show them.
SECTIONS = ("model", "shape", "numerics", "optimizations", "parallel", "profiling", "execution")


@dataclass(frozen=True)
class Setting:
    section: str
    help: str
    choices: tuple[str, ...] = ()
    flag: str | None = ""            # "" : --the-field-name; None: no flag (set by another flag or by code)
    metavar: str | None = None
    default_text: str = ""           # a default decided when the command runs, in words (device: cuda when available)
    form: str | None = None          # the launch form's label; None: not on the form
    row: int = 0                     # the form's order
    custom_only: bool = False        # a dimension of size custom: shown only then
    axis: str | None = None          # a sweep axis: its plural name there (`--sizes`, SweepSpec.sizes)
    same_program: bool = False       # a saved run differing here is another program (core.launch.scaling)
    tag: Callable[[Any, Any], str | None] | None = None    # (value, spec) -> its words in the label, or None
    needs: Callable[[Any, Any], str | None] | None = None  # (value, spec) -> why the spec rules it out, or None
    kind: Kind | None = None         # the kind of its values; None: the one its annotation and choices say


def setting(default: Any, section: str, help: str, **kw: Any) -> Any:
    """A RunSpec field: its default, and the Setting that says everything else about it."""
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}")
    return field(default=default, metadata={"setting": Setting(section, help, **kw)})


def declared(cls: type) -> Iterator[tuple[dataclasses.Field, Setting]]:
    """(field, Setting) for every declared field of a settings dataclass, in declaration order."""
    for f in dataclasses.fields(cls):
        if "setting" in f.metadata:
            yield f, f.metadata["setting"]


def flag_of(f: dataclasses.Field, s: Setting) -> str | None:
    if s.flag is None:
        return None
    return s.flag or "--" + f.name.replace("_", "-")


@functools.cache
def kind_for(f: dataclasses.Field) -> Kind:
    """The kind of a declared field's values (core.settings.kinds): its declaration's, else the one its
    annotation and choices say."""
    s: Setting = f.metadata["setting"]
    return s.kind if s.kind is not None else kind_from(f.type, s.choices)


def convert(f: dataclasses.Field, raw: str) -> Any:
    """One value of a field from its text (a comma list's item, `--vary`'s value), as its kind parses it;
    ValueError, with what the field allows, if it is none."""
    return kind_for(f).parse(raw)


@dataclass(frozen=True)
class Command:
    """A command's view of the settings: the defaults it changes (said in its help), the ones it leaves
    out (a ladder's rungs set their own), and whether its axes take comma lists (a sweep)."""
    name: str
    defaults: dict[str, Any] = field(default_factory=dict)
    omit: frozenset[str] = frozenset()
    axes: bool = False
    fixed: dict[str, Any] = field(default_factory=dict)   # values the command always uses (no flag)

    def differs_text(self, base: Any) -> str:
        """`ctx 512, precision bf16 (run: ctx 256, precision fp32)`: where its defaults are not run's."""
        mine = {**self.defaults, **self.fixed}
        if not mine:
            return ""
        ours = ", ".join(f"{k} {_show(v)}" for k, v in mine.items())
        run = ", ".join(f"{k} {_show(getattr(base, k))}" for k in mine if hasattr(base, k))
        return f"defaults that differ from `run`: {ours}" + (f" (run: {run})" if run else "")


def _show(v: Any) -> str:
    return ",".join(map(str, v)) if isinstance(v, tuple) else str(v)

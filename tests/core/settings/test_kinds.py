"""Each RunSpec setting's values are of one kind (core.settings.kinds), and the kind is the one its annotation
and choices say: the flag's type, the form's widget and the parsing of its text come from it."""
from __future__ import annotations

import typing
from dataclasses import dataclass

import pytest

from perfconsole.core.settings import RunSpec
from perfconsole.core.settings.declarations import convert, declared, kind_for, setting
from perfconsole.core.settings.kinds import Choice, Flag, Integer, Kind, Number, Pairs, Text, kind_from

HINTS = typing.get_type_hints(RunSpec)
# The annotation each kind stands for, as Python evaluates it (not as kind_from reads its text).
FOR = {bool: Flag, int: Integer, int | None: Integer, float | None: Number, str: Text, tuple[str, ...]: Pairs}


@pytest.mark.parametrize("name", [f.name for f, _ in declared(RunSpec)])
def test_every_setting_has_the_kind_its_annotation_and_choices_say(name):
    f, s = next((f, s) for f, s in declared(RunSpec) if f.name == name)
    kind = kind_for(f)
    assert isinstance(kind, Kind)
    if s.choices:
        assert kind == Choice(s.choices), name
    else:
        assert type(kind) is FOR[HINTS[name]], (name, HINTS[name], kind)
    assert kind_for(f) is kind                        # one kind a setting, not one a call


@pytest.mark.parametrize("name", [f.name for f, _ in declared(RunSpec)])
def test_every_default_reads_back_from_its_text(name):
    f = next(f for f, _ in declared(RunSpec) if f.name == name)
    kind, default = kind_for(f), getattr(RunSpec(), name)
    if default is None and isinstance(kind, Integer):
        return                                        # None is "not given"; an empty text is no integer
    assert kind.parse(kind.show(default)) == default, name
    assert convert(f, kind.show(default)) == default, name


def test_the_kinds_are_the_ones_the_settings_use():
    used = {type(kind_for(f)) for f, _ in declared(RunSpec)}
    assert used == {Flag, Choice, Integer, Number, Text, Pairs}


@pytest.mark.parametrize("kind, text, value", [
    (Flag(), " Yes ", True), (Flag(), "off", False), (Flag(), "1", True),
    (Choice(("fp32", "bf16")), " bf16", "bf16"),
    (Integer(), " 64 ", 64), (Integer(), "-3", -3),
    (Number(), "2.5", 2.5), (Number(), " ", None), (Number(), "50", 50.0),
    (Text(), " hf:llama ", "hf:llama"),
    (Pairs(), "a=1, b=x,,c=2 ", ("a=1", "b=x", "c=2")), (Pairs(), " ", ()),
])
def test_a_kind_reads_its_text(kind, text, value):
    got = kind.parse(text)
    assert got == value and type(got) is type(value)
    assert kind.parse(kind.show(got)) == got


@pytest.mark.parametrize("kind, text, message", [
    (Flag(), "maybe", "must be true or false, not 'maybe'"),
    (Choice(("fp32", "bf16")), "fp8", "must be one of fp32, bf16, not 'fp8'"),
    (Integer(), " abc ", "must be an integer, not 'abc'"),
    (Integer(), "", "must be an integer, not ''"),
    (Integer(), "2.5", "must be an integer, not '2.5'"),
    (Number(), "lots", "must be a number or empty, not 'lots'"),
    (Pairs(), "a=1, wings", "give KEY=VALUE with KEY a Python name, not 'wings'"),
    (Pairs(), "1x=2", "give KEY=VALUE with KEY a Python name, not '1x=2'"),
])
def test_a_kind_refuses_other_text_saying_what_it_allows(kind, text, message):
    with pytest.raises(ValueError) as exc:
        kind.parse(text)
    assert str(exc.value) == message


def test_a_declaration_may_name_its_kind_and_an_annotation_no_kind_takes_is_refused():
    @dataclass(frozen=True)
    class Spec:
        named: bool = setting(False, "model", "a bool read as text", kind=Text())
        guessed: bool = setting(False, "model", "a flag")

    kinds = {f.name: kind_for(f) for f, _ in declared(Spec)}
    assert kinds == {"named": Text(), "guessed": Flag()}
    with pytest.raises(TypeError, match="no kind of value for the annotation 'list\\[int\\]'"):
        kind_from("list[int]")
    assert kind_from("str", ("a", "b")) == Choice(("a", "b"))

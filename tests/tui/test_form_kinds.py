"""The launch form and the command line read a setting's text with one parser, its kind's
(core.settings.kinds): the same text gives the same value on both, and text one refuses the other refuses
in the same words. Each row's widget is the one the form's WIDGETS gives for its kind."""
from __future__ import annotations

import pytest
from console_helpers import make_app
from helpers import TINY

from perfconsole.core.cli.compare import variants
from perfconsole.core.cli.main import UsageError, build_parser
from perfconsole.core.cli.spec_args import given
from perfconsole.core.settings import RunSpec
from perfconsole.core.settings.declarations import convert, declared, flag_of
from perfconsole.core.settings.kinds import Choice, Flag, Integer, Number, Pairs, Text
from perfconsole.tui.panes.launch import DIMS, KINDS, ORDER, SETTINGS, WIDGETS, LaunchPane, form_changes
from perfconsole.tui.widgets.choice_field import ChoiceField
from perfconsole.tui.widgets.form_checkbox import FormCheckbox
from perfconsole.tui.widgets.form_input import FormInput

FIELDS = {f.name: f for f, _ in declared(RunSpec)}
FLAGS = {f.name: flag_of(f, s) for f, s in declared(RunSpec)}
# Text each kind reads, and what it reads it as.
GOOD = {Integer: [(" 64 ", 64), ("3", 3)], Number: [("50", 50.0), (" 2.5 ", 2.5), ("", None)],
        Text: [(" hf:gpt2 ", "hf:gpt2")], Pairs: [("a=1, b=x", ("a=1", "b=x")), ("rope_theta=1e6", ("rope_theta=1e6",))]}
# Text each kind refuses; a Text takes any.
BAD = {Integer: ["abc", "2.5", ""], Number: ["lots", "1,5"], Choice: ["nope", ""], Pairs: ["wings", "a=1 1x=2"],
       Flag: ["maybe", "2"]}


def form_reads(name: str, text) -> tuple[dict, dict]:
    """form_changes on one row's text (a custom size's dimensions need size custom to count)."""
    values = {name: text, **({"size": "custom"} if name in DIMS else {})}
    return form_changes(values, TINY)


def cli_reads(argv: list[str], capsys) -> tuple[dict | None, str]:
    """({field: value} the `run` command's flags give, or None, the one line it said when it refused them)."""
    p = build_parser(only="run")
    try:
        args = p.parse_args(["run", *argv])
    except SystemExit as exc:
        assert exc.code == 2
        return None, capsys.readouterr().err.strip()
    return given(args), ""


def good_cases():
    for name in ORDER:
        kind = KINDS[name]
        if isinstance(kind, Choice):
            yield name, kind.choices[-1], kind.choices[-1]
        elif isinstance(kind, Flag):
            yield name, kind.show(not FIELDS[name].default), not FIELDS[name].default
        elif name == "size":
            yield name, " tiny", "tiny"
        else:
            yield from ((name, text, value) for text, value in GOOD[type(kind)])


def bad_cases():
    for name in ORDER:
        yield from ((name, text) for text in BAD.get(type(KINDS[name]), []))


@pytest.mark.parametrize("name, text, value", list(good_cases()))
def test_the_form_and_the_flag_read_the_same_text_as_the_same_value(name, text, value, capsys):
    # Before the kinds: `--model-arg "a=1, b=x"` was one pair where the form split it in two, and an empty
    # `--bucket-mb` was refused where the form read it as the library's default; now both read them alike.
    changes, errors = form_reads(name, text)
    assert not errors and changes[name] == value
    kind = KINDS[name]
    argv = ([FLAGS[name]] if value != FIELDS[name].default else []) if isinstance(kind, Flag) else [FLAGS[name], text]
    cli, said = cli_reads(argv, capsys)
    assert said == "" and cli[name] == value, said
    assert convert(FIELDS[name], text) == value         # the text of a sweep's axis and of `compare --vary`


@pytest.mark.parametrize("name, text", list(bad_cases()))
def test_the_form_and_the_flag_refuse_the_same_text_in_the_same_words(name, text, capsys):
    # Before the kinds the flag said argparse's words ("invalid int value: 'abc'", "invalid float value"),
    # and a choice was refused only by validation after parsing; now the flag says what the form says.
    changes, errors = form_reads(name, text)
    assert name not in changes and errors[name]
    with pytest.raises(ValueError) as exc:
        convert(FIELDS[name], text)
    assert str(exc.value) == errors[name]
    if isinstance(KINDS[name], Flag):
        return                                          # a flag takes no text: its text is --vary's (below)
    cli, said = cli_reads([FLAGS[name], text], capsys)
    assert cli is None and said == f"perfconsole run: error: argument {FLAGS[name]}: {errors[name]}"


def test_a_flag_s_text_is_refused_by_compare_vary_in_the_form_s_words():
    _, errors = form_reads("compile", "maybe")
    with pytest.raises(UsageError) as exc:
        variants(TINY, "compile=false,maybe")
    assert str(exc.value) == f"--vary compile: {errors['compile']}"
    assert [s.compile for s in variants(TINY, "compile=off,on")] == [False, True]


def test_every_kind_a_form_row_has_has_a_widget():
    assert {type(KINDS[name]) for name in ORDER} <= set(WIDGETS)
    assert {type(KINDS[name]) for name in ORDER} == {Flag, Choice, Integer, Number, Text, Pairs}


@pytest.mark.parametrize("base", [TINY, TINY.with_(model="hf:llama", model_args=("num_key_value_heads=2",),
                                                   nproc=2, parallel="ddp", bucket_mb=50.0, compile=True)],
                         ids=["cpu tiny", "hf ddp"])
async def test_each_row_s_widget_is_the_one_its_kind_maps_to(base):
    app = make_app(base)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        await pilot.pause()
        for name in ORDER:
            shown = pane.query_one(f"#f-{name}")
            if name == "size":                          # a selector of the model's own sizes, not of a text
                assert isinstance(shown, ChoiceField) and shown.value == base.size
                continue
            kind = KINDS[name]
            made = WIDGETS[type(kind)](kind, SETTINGS[name], getattr(base, name), f"made-{name}")
            assert type(shown) is type(made), name
            assert type(shown) is {Flag: FormCheckbox, Choice: ChoiceField}.get(type(kind), FormInput), name
            assert shown.value == made.value, name
            if isinstance(shown, FormInput):
                assert shown.placeholder == made.placeholder, name
                value = getattr(base, name)                 # None (a dimension not given) shows as empty
                assert shown.value == "" if value is None else kind.parse(shown.value) == value, name
            if isinstance(shown, ChoiceField):          # the rules may narrow what it offers, never widen
                assert set(shown.options) <= set(kind.choices) and shown.value in shown.options

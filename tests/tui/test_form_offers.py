"""The launch form never offers a choice that validation refuses: every setting on the form, every value its
selector lists or its box can take, beside a set of valid specs (helpers.RULE_BASES)."""
from __future__ import annotations

import pytest
from console_helpers import make_app
from helpers import RULE_BASES

from perfconsole.core.settings import RunSpec, SpecError
from perfconsole.tui.panes.launch import ORDER, LaunchPane
from perfconsole.tui.widgets.choice_field import ChoiceField
from perfconsole.tui.widgets.form_checkbox import FormCheckbox

# Size custom shows the four dimensions to fill in; the form's spec is the one with them.
CUSTOM = {"d_model": 64, "d_ff": 128, "n_layers": 2, "n_heads": 4}


def offered(pane: LaunchPane) -> dict[str, tuple]:
    """{field: the values the form lets a person pick now} for each selector and box."""
    out: dict[str, tuple] = {}
    for name in ORDER:
        w = pane.query_one(f"#f-{name}")
        if isinstance(w, ChoiceField):
            out[name] = w.options
        elif isinstance(w, FormCheckbox):
            out[name] = (w.value,) if w.refused else (w.value, not w.value)
    return out


def refusals(spec: RunSpec, offers: dict[str, tuple]) -> list[str]:
    out = []
    for name, values in offers.items():
        for value in values:
            change = {name: value, **(CUSTOM if (name, value) == ("size", "custom") else {})}
            try:
                spec.with_(**change).validate()
            except SpecError as exc:
                out.append(f"{name} {value!r}: {exc}")
    return out


@pytest.mark.parametrize("base", RULE_BASES.values(), ids=RULE_BASES.keys())
async def test_every_choice_the_form_offers_validates(base):
    app = make_app(base)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        await pilot.pause()
        assert pane.spec is not None, pane.errors
        offers = offered(pane)
        assert {"parallel", "comm_hook", "scaling", "mode"} <= set(offers)
        assert refusals(pane.spec, offers) == []


async def test_a_box_the_rules_keep_does_not_toggle_and_says_why():
    app = make_app(RULE_BASES["cpu tiny"])
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        await pilot.pause()
        scaling, compile_ = pane.query_one("#f-scaling", FormCheckbox), pane.query_one("#f-compile", FormCheckbox)
        assert scaling.refused == "scaling: compares against one process; it needs nproc 2 or more"
        scaling.focus()
        await pilot.press("space")
        await pilot.pause()
        assert not scaling.value and pane.spec is not None
        pane.set_value("nproc", "2")
        pane.set_value("parallel", "ddp")
        await pilot.pause()
        assert scaling.refused is None
        await pilot.press("space")
        await pilot.pause()
        assert scaling.value and pane.spec is not None and pane.spec.scaling
        assert compile_.refused is None and pane.query_one("#f-comm_hook", ChoiceField).options == ("none", "bf16")

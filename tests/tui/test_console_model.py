"""The launch form's model: its field and arguments, the size selector offering the model's own sizes and
keeping a pre-filled one, bad models said beside the field, and a real hf:llama tiny run from the form."""
from __future__ import annotations

from pathlib import Path

import pytest
from console_helpers import TINY, make_app, plain, wait_for
from textual.widgets import Static

from perfconsole.core.settings.kinds import split_pairs
from perfconsole.tui.panes.launch import LaunchPane, pick_size, spec_from_form
from perfconsole.tui.widgets.choice_field import ChoiceField

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "student_model.py"
LLAMA_SIZES = ("tiny", "1B", "3B", "8B", "default", "custom")


def _sizes(app) -> tuple[str, ...]:
    return app.query_one("#f-size", ChoiceField).options


def _err(app, name: str) -> str:
    return plain(app.query_one(f"#err-{name}", Static).content).strip()


async def test_a_prefilled_hf_model_keeps_its_size_and_offers_its_own():
    app = make_app(TINY.with_(model="hf:llama", size="1B", model_args=("num_key_value_heads=4",)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        assert app.query_one("#f-model").value == "hf:llama"
        assert app.query_one("#f-model_args").value == "num_key_value_heads=4"
        assert _sizes(app) == LLAMA_SIZES and app.query_one("#f-size", ChoiceField).value == "1B"
        assert pane.spec is not None and (pane.spec.model, pane.spec.size) == ("hf:llama", "1B")
        assert pane.spec.model_args == ("num_key_value_heads=4",)


async def test_the_size_list_follows_the_model_and_the_chosen_size_comes_back():
    app = make_app()                       # builtin tiny on the CPU
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        pane.set_value("model", "hf:llama")
        pane.set_value("size", "3B")       # a person's choice
        await pilot.pause()
        assert pane.spec is not None and pane.spec.size == "3B"
        pane.set_value("model", "builtin")     # has no 3B: the CPU's default, tiny
        await pilot.pause()
        assert "2.7B" in _sizes(app) and "3B" not in _sizes(app)
        assert pane.spec is not None and (pane.spec.model, pane.spec.size) == ("builtin", "tiny")
        pane.set_value("model", "hf:llama")    # the choice comes back
        await pilot.pause()
        assert _sizes(app) == LLAMA_SIZES and pane.spec.size == "3B"


async def test_bad_models_and_arguments_show_beside_their_field():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        for model, said in (("hf:nosucharch", "transformers has no architecture 'nosucharch'"),
                            ("nowhere/mine.py:build", "no file nowhere/mine.py"),
                            ("no_such_pkg.models:build", "no module named 'no_such_pkg'"),
                            ("mine.py", "must be builtin, hf:ARCH, PATH.py:FACTORY")):
            pane.set_value("model", model)
            await pilot.pause()
            assert pane.spec is None and said in pane.errors["model"] and said in _err(app, "model"), model
            assert app.query_one("#btn-run").disabled
        pane.set_value("model", "hf:llama")
        pane.set_value("model_args", "wings")
        await pilot.pause()
        assert pane.spec is None and "KEY=VALUE" in _err(app, "model_args")
        pane.set_value("model", "builtin")
        pane.set_value("model_args", "rope_theta=1e6")
        await pilot.pause()
        assert pane.spec is None and "the builtin model takes none" in _err(app, "model_args")
        pane.set_value("model_args", "")
        await pilot.pause()
        assert pane.spec is not None and not _err(app, "model")
        assert app.is_running


async def test_a_factory_has_no_size_row_and_takes_its_arguments():
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        pane.set_value("size", "custom")       # dimensions a factory must not receive
        pane.set_value("d_model", "64")
        pane.set_value("model", f"{EXAMPLE}:build")
        pane.set_value("model_args", "d_model=32, n_layers=1")
        await pilot.pause()
        assert not app.query_one("#f-size").display and not app.query_one("#f-d_model").display
        assert pane.spec is not None and pane.spec.model == f"{EXAMPLE}:build"
        assert pane.spec.model_args == ("d_model=32", "n_layers=1") and pane.spec.d_model is None
        pane.set_value("model", "builtin")     # the size row is back, custom with its dimensions
        pane.set_value("model_args", "")
        await pilot.pause()
        assert app.query_one("#f-size").display and app.query_one("#f-d_model").display
        assert pane.spec is None and "integer" in pane.errors["d_ff"]


def test_form_helpers():
    assert split_pairs("a=1, b=x,,c=2 ") == ("a=1", "b=x", "c=2") and split_pairs(" ") == ()
    assert pick_size(LLAMA_SIZES, "small", "tiny", "cuda") == "tiny"    # the one shown
    assert pick_size(LLAMA_SIZES, "small", "2.7B", "cuda") == "1B"      # the GPU's default: smallest published
    assert pick_size(LLAMA_SIZES, "8B", "tiny", "cpu") == "8B"          # the one chosen
    spec, errors = spec_from_form({"model": " hf:gpt2 ", "size": "124M", "model_args": ""}, TINY)
    assert not errors and (spec.model, spec.size) == ("hf:gpt2", "124M")


@pytest.mark.e2e
@pytest.mark.slow
async def test_hf_llama_tiny_runs_from_the_form_to_finished():
    pytest.importorskip("transformers")
    app = make_app(TINY.with_(ctx=16, warmup=0, steps=2))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        pane.set_value("model", "hf:llama")
        await pilot.pause()
        assert pane.spec is not None and (pane.spec.model, pane.spec.size) == ("hf:llama", "tiny")
        await pilot.press("ctrl+r")
        # transformers' import alone can take minutes on a loaded machine
        await wait_for(pilot, lambda: app.session.runs and app.session.runs[-1].finished, timeout=1200)
        await pilot.pause()
        r = app.session.runs[-1]
        assert r.status == "ok", r.error
        assert r.model["architecture"] == "LlamaForCausalLM" and len(r.steps) == 2
        assert plain(app.query_one("#live-status", Static).content).startswith("finished")


async def test_a_misspelt_factory_function_is_said_whole_beside_the_field_at_80x24():
    """The file is read, not run: a name it does not define is refused before any process, and the whole
    message (with the names the file does define) wraps beside the field instead of being cut."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(LaunchPane)
        pane.set_value("model", f"{EXAMPLE}:bild")
        await pilot.pause()
        said = f"{EXAMPLE} has no function 'bild' (it defines Block, StudentGPT, build)"
        assert pane.spec is None and _err(app, "model") == said
        shown = app.query_one("#err-model", Static)
        # Laid out on a later refresh than the text is set: on a loaded machine one pause saw it one line high.
        await wait_for(pilot, lambda: shown.size.height >= 2, timeout=30)
        assert shown.size.height >= 2 and shown.size.width < len(said)   # wrapped at 80 columns, not cut
        assert app.query_one("#btn-run").disabled
        pane.set_value("model", f"{EXAMPLE}:build")
        await pilot.pause()
        assert pane.spec is not None and _err(app, "model") == ""


async def test_the_form_offers_only_the_choices_the_rest_of_it_allows():
    """No nsys or ncu on the CPU (the CLI refuses them), no checkpointing of a forward; a value the form no
    longer allows stays shown, with its reason beside it."""
    def offered(name: str) -> tuple[str, ...]:
        return app.query_one(f"#f-{name}", ChoiceField).options

    app = make_app(TINY.with_(device="cpu"))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(LaunchPane)
        await pilot.pause()
        assert offered("profile") == ("none", "torch") and "blocks" in offered("checkpoint")
        pane.set_value("checkpoint", "blocks")
        pane.set_value("mode", "fwd")
        await pilot.pause()
        assert offered("checkpoint") == ("none", "blocks") and pane.spec is None   # kept, and said why
        assert _err(app, "checkpoint").startswith("recomputes the forward in the backward")
        pane.set_value("checkpoint", "none")
        await pilot.pause()
        assert offered("checkpoint") == ("none",) and pane.spec is not None

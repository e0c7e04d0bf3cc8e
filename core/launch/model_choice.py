"""The `model` field as the launch form meets it: the sizes a model offers, and what can be told of a model
before any process starts. Both read files only (model.sources never imports torch or transformers here),
so the form can ask at every key typed; building the model in the worker remains the full check."""
from __future__ import annotations

from perfconsole.core.settings import SpecError
from perfconsole.model.sources import ModelError, check as check_source, parse_args, sizes as source_sizes


def sizes(model: str) -> tuple[str, ...] | None:
    """The sizes this model may take (builtin's, an hf architecture's own); () for a factory, which sets
    its own shape; None where the string names no model yet."""
    try:
        return source_sizes(model)
    except ModelError:
        return None


def check(model: str, model_args: tuple[str, ...]) -> None:
    """Raises SpecError on `model` or `model_args` for what the worker would refuse at once and a file
    tells: an architecture transformers lacks (or transformers absent), a missing file or package, a pair
    that is not KEY=VALUE."""
    try:
        check_source(model)
        parse_args(model_args)
    except ModelError as exc:
        field, _, message = str(exc).partition(": ")
        if field not in ("model", "model_args"):
            field, message = "model", str(exc)
        raise SpecError(field, message) from None

"""A user's model: `PATH.py:FACTORY` or `package.module:FACTORY` (the contract is in docs/models.md).

FACTORY is called as `FACTORY(ctx=..., vocab_size=..., **model_args)` and returns a `torch.nn.Module`
mapping a (batch, ctx) tensor of token ids to logits (a tensor, or an object with `.logits`), or a dict
`{"model": module, "loss": fn, "batch": fn}` for a model that needs its own loss or inputs. Anything
that goes wrong in the user's code is a ModelError naming the last frame in the user's file.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from perfconsole.model.sources import Built, ModelError, ModelInfo, ModelRequest, parse_args

CONTRACT = "see docs/models.md"


def split(model: str) -> tuple[str, str]:
    target, _, factory = model.rpartition(":")
    return target, factory


def where(exc: BaseException, files: tuple[str, ...]) -> str:
    """The last frame of the traceback that is in one of `files` (the user's), as 'name.py:LINE in FUNC'."""
    frames = traceback.extract_tb(exc.__traceback__)
    resolved = {str(Path(f).resolve()) for f in files if f}
    mine = [f for f in frames if str(Path(f.filename).resolve()) in resolved] or frames[-1:]
    if not mine:
        return ""
    f = mine[-1]
    return f" ({Path(f.filename).name}:{f.lineno} in {f.name})"


def said(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def locate(target: str) -> None:
    """The file exists, or the module's top-level package can be found: told without running the user's
    code (only a top-level name is looked up, since finding a submodule imports its package)."""
    if target.endswith(".py"):
        if not Path(target).expanduser().is_file():
            raise ModelError(f"model: no file {target}")
        return
    top = target.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ModelError(f"model: no module named {top!r} (is it installed, or on PYTHONPATH?)")


def load(target: str) -> tuple[ModuleType, str | None]:
    """Import the user's module; returns it and its file."""
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ModelError(f"model: no file {target}")
        name = f"perfconsole_user_model_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ModelError(f"model: cannot load {target} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling inside the user's module look themselves up here
        # The user's folder on the path, so the file can import its neighbours as its own scripts do.
        sys.path.insert(0, str(path.resolve().parent))
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise ModelError(f"model: importing {target} raised {said(exc)}{where(exc, (str(path),))}") from None
        return module, str(path.resolve())
    try:
        module = importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and target.startswith(exc.name):
            raise ModelError(f"model: no module named {exc.name!r} (is it installed, or on PYTHONPATH?)") from None
        raise ModelError(f"model: importing {target} raised {said(exc)}{where(exc, ())}") from None
    except Exception as exc:
        raise ModelError(f"model: importing {target} raised {said(exc)}{where(exc, (getattr(exc, 'filename', ''),))}") from None
    return module, getattr(module, "__file__", None)


def sha256(path: str | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def call(fn: Any, request: ModelRequest, file: str | None, label: str) -> Any:
    kwargs = parse_args(request.args)
    try:
        return fn(ctx=request.ctx, vocab_size=request.vocab_size, **kwargs)
    except TypeError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        if len(frames) <= 1:  # the call itself failed: the arguments do not fit the signature
            raise ModelError(f"model_args: {label} rejected its arguments: {str(exc).splitlines()[0]} "
                             f"(it is called with ctx, vocab_size and each --model-arg; {CONTRACT})") from None
        raise ModelError(f"model: {label} raised {said(exc)}{where(exc, (file or '',))}") from None
    except Exception as exc:
        raise ModelError(f"model: {label} raised {said(exc)}{where(exc, (file or '',))}") from None


def unpack(result: Any, label: str) -> tuple[Any, Any, Any]:
    import torch

    loss = batch = None
    if isinstance(result, dict):
        extra = sorted(set(result) - {"model", "loss", "batch"})
        if extra or "model" not in result:
            raise ModelError(f"model: {label} returned a dict; it takes the keys model, loss and batch "
                             f"(model required), not {', '.join(extra) or 'no model'}")
        result, loss, batch = result["model"], result.get("loss"), result.get("batch")
        for key, fn in (("loss", loss), ("batch", batch)):
            if fn is not None and not callable(fn):
                raise ModelError(f"model: {label}'s {key} is a {type(fn).__name__}, not a function")
    if not isinstance(result, torch.nn.Module):
        raise ModelError(f"model: {label} returned a {type(result).__name__}, not a torch.nn.Module ({CONTRACT})")
    return result, loss, batch


def build(request: ModelRequest, device: Any) -> Built:
    import torch

    target, name = split(request.model)
    module, file = load(target)
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise ModelError(f"model: {target} has no function {name!r}" + (f" (it defines {', '.join(found[:8])})" if found else ""))
    label = f"{Path(target).name if target.endswith('.py') else target}:{name}"
    with torch.device(device):
        model, loss, batch = unpack(call(fn, request, file, label), label)
    model = model.to(device)  # what the user's code made on the CPU explicitly

    def twin(on: Any) -> Any:
        with torch.device(on):
            return unpack(call(fn, request, file, label), label)[0]

    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    info = ModelInfo("factory", label, type(model).__name__, params, request.vocab_size,
                     f"{request.model}, called with ctx={request.ctx}, vocab_size={request.vocab_size}"
                     + "".join(f", {a}" for a in request.args), file=file, file_sha256=sha256(file),
                     config={"args": list(request.args)})
    return Built(model, info, loss=loss, batch=batch, twin=twin)

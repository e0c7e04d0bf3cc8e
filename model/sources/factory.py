"""A user's model: `PATH.py:FACTORY` or `package.module:FACTORY` (the contract is in docs/models.md).

FACTORY is called as `FACTORY(ctx=..., vocab_size=..., **model_args)` (vocab_size only where the spec names
one or the signature requires it: a default of the factory's own holds, read back from its logits) and returns a
`torch.nn.Module`
mapping a (batch, ctx) tensor of token ids to logits (a tensor, or an object with `.logits`), or a dict
`{"model": module, "loss": fn, "batch": fn}` for a model that needs its own loss or inputs. Anything
that goes wrong in the user's code is a ModelError naming the last frame in the user's file.
"""
from __future__ import annotations

import hashlib
import inspect
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from perfconsole.model.config import BUILTIN_VOCAB
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


def locate(target: str, name: str | None = None) -> None:
    """The file exists, or the module's top-level package can be found: told without running the user's
    code (only a top-level name is looked up, since finding a submodule imports its package). A file's
    source is read, never run: a `name` it defines nowhere at its top level is refused as `build` would."""
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ModelError(f"model: no file {target}")
        if name is not None:
            _defines(path, target, name)
        return
    top = target.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ModelError(f"model: no module named {top!r} (is it installed, or on PYTHONPATH?)")


def _defines(path: Path, target: str, name: str) -> None:
    """Refuse a factory name the file binds nowhere (a def, class, assignment or import, at any depth of its
    top-level statements, so a name bound under an `if` or `try` counts). A file that cannot be parsed,
    star-imports or has a module __getattr__ is left to `build`, which runs it."""
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return
    bound: set[str] = set()
    for node in tree.body:
        for n in [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ast.walk(node):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(n.name)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                bound.add(n.id)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                if any(a.name == "*" for a in n.names):
                    return
                bound |= {(a.asname or a.name).partition(".")[0] for a in n.names}
    if name in bound or "__getattr__" in bound:
        return
    found = sorted(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                   and not n.name.startswith("_"))
    raise ModelError(f"model: {target} has no function {name!r}" + (f" (it defines {', '.join(found[:8])})" if found else ""))


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


def vocab_to_pass(fn: Any, request: ModelRequest) -> int | None:
    """The vocab_size the factory is called with: the spec's where it names one; else none, so the factory's
    own default holds, except where its signature requires the argument (then the builtin's 10,000)."""
    if request.vocab_size is not None:
        return request.vocab_size
    try:
        param = inspect.signature(fn).parameters.get("vocab_size")
    except (TypeError, ValueError):
        return BUILTIN_VOCAB
    return BUILTIN_VOCAB if param is not None and param.default is inspect.Parameter.empty else None


def call(fn: Any, request: ModelRequest, file: str | None, label: str, vocab: int | None) -> Any:
    kwargs = parse_args(request.args)
    if vocab is not None:
        kwargs["vocab_size"] = vocab
    try:
        return fn(ctx=request.ctx, **kwargs)
    except TypeError as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        if len(frames) <= 1:  # the call itself failed: the arguments do not fit the signature
            raise ModelError(f"model_args: {label} rejected its arguments: {str(exc).splitlines()[0]} "
                             f"(it is called with ctx, vocab_size and each --model-arg; {CONTRACT})") from None
        raise ModelError(f"model: {label} raised {said(exc)}{where(exc, (file or '',))}") from None
    except Exception as exc:
        raise ModelError(f"model: {label} raised {said(exc)}{where(exc, (file or '',))}") from None


def vocab_from_logits(model: Any, ctx: int, device: Any, label: str) -> int:
    """The vocabulary a factory chose, read from the last dimension of its logits for a short batch of zeros."""
    import torch

    try:
        with torch.no_grad():
            out = model(torch.zeros((1, max(1, min(ctx, 8))), dtype=torch.long, device=device))
        logits = out.logits if hasattr(out, "logits") else out
        return int(logits.shape[-1])
    except Exception as exc:
        raise ModelError(f"model: {label} was called without vocab_size (its own default), and its logits for a "
                         f"batch of token 0 could not be read ({said(exc)}); give --vocab-size") from None


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
    passed = vocab_to_pass(fn, request)
    with torch.device(device):
        model, loss, batch = unpack(call(fn, request, file, label, passed), label)
    model = model.to(device)  # what the user's code made on the CPU explicitly
    if passed is not None:
        vocab, said_vocab = passed, f"vocab_size={passed}"
    elif batch is None:
        vocab = vocab_from_logits(model, request.ctx, device, label)
        said_vocab = f"its own vocab_size ({vocab}, read from its logits)"
    else:  # its batch maker draws the tokens; it is given the builtin's vocabulary as a bound
        vocab, said_vocab = BUILTIN_VOCAB, f"its own vocab_size (its batch maker given {BUILTIN_VOCAB})"

    def twin(on: Any) -> Any:
        with torch.device(on):
            return unpack(call(fn, request, file, label, passed), label)[0]

    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    info = ModelInfo("factory", label, type(model).__name__, params, vocab,
                     f"{request.model}, called with ctx={request.ctx}, {said_vocab}"
                     + "".join(f", {a}" for a in request.args), file=file, file_sha256=sha256(file),
                     config={"args": list(request.args), "vocab_size": vocab})
    return Built(model, info, loss=loss, batch=batch, twin=twin)

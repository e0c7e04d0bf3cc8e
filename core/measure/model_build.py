"""The engine's side of the model sources (model.sources): build what a spec names, make its batch, call
it, check what it returns, and open per-layer ranges on it with module hooks.

The per-layer ranges need no annotation in the model: the repeated blocks are the children of the
model's largest nn.ModuleList (`model.layers.3`), and each block's direct children get ranges too
(`model.layers.3.mlp`), named by module path. A model that opens its own ranges (the builtin) keeps them.
Hooks are installed only for a profiled run without torch.compile, as the builtin's ranges are.

The model's FLOPs per step are counted here too (`counted_flops`): torch.utils.flop_counter.FlopCounterMode
over one forward and backward of the model, with the loss, on a twin on the meta device, or of fake tensors,
where the model's source can build one (no memory, no time on the device), else on the real model with the
real batch (one extra step before warm-up).

The twin runs eager attention: FlopCounterMode's SDPA formula refuses grouped-query shapes, and eager
attention is written as the two matmuls it counts. Attention FLOPs are thus counted in full: the whole
(ctx x ctx) score matrix, masked afterwards, as core.flops' formula counts them; a causal kernel that skips
the masked half does about half of that attention work. Only matmul-like ops are counted (FlopCounterMode's
table), 2 FLOPs per multiply-add, as the formula does.

Counts are cached per model, shape and batch in the data directory (flops.json); a factory's cache key
holds its file's hash, so an edited model is counted again.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from perfconsole.core.flops import FLOPS_FILE as CACHE_FILE, forward_flops
from perfconsole.core.paths import data_dir
from perfconsole.core.settings import RunSpec
from perfconsole.model import annotate
from perfconsole.model.sources import Built, ModelError, ModelRequest
from perfconsole.model.sources import build as build_source
from perfconsole.model.sources.factory import said, where


def request(spec: RunSpec) -> ModelRequest:
    return ModelRequest(spec.model, spec.size, spec.ctx, spec.vocab_size, spec.attention,
                        (spec.d_model, spec.d_ff, spec.n_layers, spec.n_heads), tuple(spec.model_args))


def build(spec: RunSpec, device: torch.device) -> Built:
    return build_source(request(spec), device)


def to_device(x: Any, device: torch.device | str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(to_device(v, device) for v in x)
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    return x


def make_batch(built: Built, spec: RunSpec, device: torch.device | str) -> tuple[Any, Any]:
    """(inputs, targets) on the device: the model's own batch maker, else token ids and next-token targets
    drawn from the model's vocabulary with the spec's seed."""
    gen = torch.Generator(device="cpu").manual_seed(spec.seed)
    if built.batch is not None:
        try:
            inputs, targets = built.batch(spec.batch, spec.ctx, built.info.vocab_size, gen)
        except Exception as exc:
            raise ModelError(f"model: {built.info.name}'s batch raised {type(exc).__name__}: {exc}") from None
        return to_device(inputs, device), to_device(targets, device)
    ids = torch.randint(0, built.info.vocab_size, (spec.batch, spec.ctx + 1), generator=gen)
    return ids[:, :-1].to(device), ids[:, 1:].to(device)


def call(model: nn.Module, inputs: Any) -> Any:
    """The model's output for the inputs: a tuple is spread, a dict passed as keywords."""
    if isinstance(inputs, tuple):
        return model(*inputs)
    if isinstance(inputs, dict):
        return model(**inputs)
    return model(inputs)


def logits_of(out: Any) -> Any:
    return out.logits if hasattr(out, "logits") else out


def check_logits(logits: Any, spec: RunSpec, vocab_size: int, name: str) -> None:
    """The contract with the default loss: floating (batch, ctx, vocab) logits. Read from the shape only,
    so no synchronisation."""
    want = (spec.batch, spec.ctx, vocab_size)
    if not isinstance(logits, torch.Tensor):
        raise ModelError(f"model: {name} returned a {type(logits).__name__}; logits must be a tensor "
                         f"of shape {want} (or an object with .logits)")
    if tuple(logits.shape) != want:
        raise ModelError(f"model: {name} returned logits of shape {tuple(logits.shape)}, not (batch, ctx, vocab) = {want}")
    if not logits.is_floating_point():
        raise ModelError(f"model: {name} returned logits of dtype {logits.dtype}; they must be floating point")


@contextlib.contextmanager
def first_step(built: Built | None) -> Iterator[None]:
    """Around the first forward and loss of a user's factory model: what its code raises there is the model
    failing its contract, as wrong logits are, so a ModelError (one line naming the last frame in the user's
    file, exit 2) rather than a crash. An out-of-memory stays one (the run is `oom`), and so does a failure
    of torch.compile's own machinery, which is not the user's code."""
    try:
        yield
    except ModelError:
        raise
    except Exception as exc:
        if built is None or built.info.source != "factory" or _not_the_model(exc):
            raise
        raise ModelError(f"model: {built.info.name}'s first step raised {said(exc)}"
                         f"{where(exc, (built.info.file or '',))}") from None


def _not_the_model(exc: BaseException) -> bool:
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower():
        return True
    return type(exc).__module__.startswith(("torch._dynamo", "torch._inductor"))


def repeated_blocks(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(path, block) for the children of the largest nn.ModuleList: the model's repeated layers."""
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m)]
    if not lists:
        return []
    path, biggest = max(lists, key=lambda nm: (len(nm[1]), -nm[0].count(".")))
    prefix = f"{path}." if path else ""
    return [(f"{prefix}{i}", block) for i, block in enumerate(biggest)]


def install_layer_ranges(model: nn.Module) -> list[Any]:
    """Forward hooks that open a range (model.annotate's factory: NVTX or record_function) around each
    repeated block and each of its children; returns the handles. A range is only opened while ranges are
    on, so the hooks cost a dictionary look-up otherwise."""
    handles: list[Any] = []
    open_ranges: dict[int, list[Any]] = {}

    def pre(name: str):
        def hook(module: nn.Module, _args: Any) -> None:
            rng = annotate.annotate(name)
            rng.__enter__()
            open_ranges.setdefault(id(module), []).append(rng)
        return hook

    def post(module: nn.Module, _args: Any, _out: Any) -> None:
        stack = open_ranges.get(id(module))
        if stack:
            stack.pop().__exit__(None, None, None)

    for path, block in repeated_blocks(model):
        for name, m in [(path, block), *((f"{path}.{n}", c) for n, c in block.named_children())]:
            handles.append(m.register_forward_pre_hook(pre(name)))
            handles.append(m.register_forward_hook(post))
    return handles


METHOD = 1   # part of the key: a change to how FLOPs are counted counts every model again
AS_WRITTEN = "full: the model as written (FlopCounterMode counts SDPA's whole score matrix too)"
FULL = "full: the eager twin computes the whole score matrix and masks it (no causal half subtracted)"


def flops_key(spec: RunSpec, built: Built) -> str:
    i = built.info
    return json.dumps([METHOD, torch.__version__, spec.model, spec.size, spec.dims(), list(spec.model_args),
                       spec.ctx, spec.batch, i.vocab_size, i.params, i.file_sha256])


def counted_flops(spec: RunSpec, built: Built, inputs: Any = None, targets: Any = None,
            loss_fn: Any = None) -> dict[str, Any]:
    """{forward_flops, backward_flops, flops_source, counted_on, attention_flops, cached}: per step of the
    spec's batch; `cached` says whether an earlier count was read (every record has the key).
    `inputs`/`targets`/`loss_fn` are the real step's, for the fallback on the real model."""
    k = flops_key(spec, built)
    cache = _read_flops()
    if k in cache:
        return {**cache[k], "cached": True}
    found, reason = None, "the source cannot build a twin"
    for on in ("meta", "fake") if built.twin is not None else ():
        try:
            note = FULL if built.info.source != "factory" else AS_WRITTEN
            found = _on_twin(built, spec, built.loss or loss_fn, on) | {"counted_on": on, "attention_flops": note}
            break
        except Exception as exc:  # a model this twin cannot run: the next, then the real model
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if found is None and inputs is not None:
        try:
            found = _count(built.module, inputs, targets, built.loss or loss_fn) | {
                "counted_on": "device", "attention_flops": "as the model runs it (SDPA: full score matrix)"}
            built.module.zero_grad(set_to_none=True)
        except Exception as exc:
            reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if found is None:
        return formula_flops(spec, built) | {"not_counted": reason, "cached": False}
    found["flops_source"] = "counted"
    cache[k] = found
    _write_flops(cache)
    return found | {"cached": False}


def _on_twin(built: Built, spec: RunSpec, loss_fn: Any, on: str) -> dict[str, Any]:
    """Count on a twin with no storage: on the meta device, or as fake tensors (FakeTensorMode), which
    transformers' masking code takes for tracing and so asks no data-dependent question of."""
    assert built.twin is not None
    if on == "meta":
        return _count(built.twin(torch.device("meta")), *make_batch(built, spec, "meta"), loss_fn)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        return _count(built.twin(torch.device("cpu")), *make_batch(built, spec, "cpu"), loss_fn)


def _count(model: torch.nn.Module, inputs: Any, targets: Any, loss_fn: Any) -> dict[str, Any]:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        logits = logits_of(call(model, inputs))
        loss = loss_fn(logits, targets)
        fwd = counter.get_total_flops()
        loss.backward()
        total = counter.get_total_flops()
    return {"forward_flops": float(fwd), "backward_flops": float(total - fwd)}


def formula_flops(spec: RunSpec, built: Built) -> dict[str, Any]:
    """core.flops' formula for the builtin; 2 x parameters x tokens forward (and twice that backward) else."""
    if built.info.source == "builtin":
        d_model, d_ff, n_layers, _ = spec.dims()
        fwd = forward_flops(d_model, d_ff, n_layers, built.info.vocab_size, spec.batch, spec.ctx)
        note = "full score matrix (core.flops)"
    else:
        fwd = 2.0 * built.info.params * spec.batch * spec.ctx
        note = "not counted: 2 x parameters x tokens leaves attention's score matmuls out"
    return {"forward_flops": fwd, "backward_flops": 2 * fwd, "flops_source": "formula", "attention_flops": note}


def _read_flops() -> dict[str, Any]:
    try:
        doc = json.loads((data_dir() / CACHE_FILE).read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_flops(doc: dict[str, Any]) -> None:
    from perfconsole.core.store import write_atomic

    try:
        write_atomic(data_dir() / CACHE_FILE, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only data directory costs a recount next time, nothing else

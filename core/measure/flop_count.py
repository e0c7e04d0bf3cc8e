"""FLOPs per step, counted: torch.utils.flop_counter.FlopCounterMode over one forward and backward of the
model, with the loss, on a twin on the meta device, or of fake tensors, where the model's source can build one (no memory,
no time on the device), else on the real model with the real batch (one extra step before warm-up).

The twin runs eager attention: FlopCounterMode's SDPA formula refuses grouped-query shapes, and eager
attention is written as the two matmuls it counts. Attention FLOPs are thus counted in full: the whole
(ctx x ctx) score matrix, masked afterwards, as core.flops' formula counts them; a causal kernel that skips
the masked half does about half of that attention work. Only matmul-like ops are counted (FlopCounterMode's
table), 2 FLOPs per multiply-add, as the formula does.

Counts are cached per model, shape and batch in the data directory (flops.json); a factory's cache key
holds its file's hash, so an edited model is counted again.
"""
from __future__ import annotations

import json
from typing import Any

import torch

from perfconsole.core.flops import FLOPS_FILE as CACHE_FILE, forward_flops
from perfconsole.core.measure import model_build
from perfconsole.core.paths import data_dir
from perfconsole.core.settings import RunSpec
from perfconsole.model.sources import Built

METHOD = 1   # part of the key: a change to how FLOPs are counted counts every model again
AS_WRITTEN = "full: the model as written (FlopCounterMode counts SDPA's whole score matrix too)"
FULL = "full: the eager twin computes the whole score matrix and masks it (no causal half subtracted)"


def key(spec: RunSpec, built: Built) -> str:
    i = built.info
    return json.dumps([METHOD, torch.__version__, spec.model, spec.size, spec.dims(), list(spec.model_args),
                       spec.ctx, spec.batch, i.vocab_size, i.params, i.file_sha256])


def counted(spec: RunSpec, built: Built, inputs: Any = None, targets: Any = None,
            loss_fn: Any = None) -> dict[str, Any]:
    """{forward_flops, backward_flops, flops_source, counted_on, attention_flops, cached}: per step of the
    spec's batch; `cached` says whether an earlier count was read (every record has the key).
    `inputs`/`targets`/`loss_fn` are the real step's, for the fallback on the real model."""
    k = key(spec, built)
    cache = _read()
    if k in cache:
        return {**cache[k], "cached": True}
    found, reason = None, "the source cannot build a twin"
    for where in ("meta", "fake") if built.twin is not None else ():
        try:
            note = FULL if built.info.source != "factory" else AS_WRITTEN
            found = _on_twin(built, spec, built.loss or loss_fn, where) | {"counted_on": where, "attention_flops": note}
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
        return formula(spec, built) | {"not_counted": reason, "cached": False}
    found["flops_source"] = "counted"
    cache[k] = found
    _write(cache)
    return found | {"cached": False}


def _on_twin(built: Built, spec: RunSpec, loss_fn: Any, where: str) -> dict[str, Any]:
    """Count on a twin with no storage: on the meta device, or as fake tensors (FakeTensorMode), which
    transformers' masking code takes for tracing and so asks no data-dependent question of."""
    assert built.twin is not None
    if where == "meta":
        return _count(built.twin(torch.device("meta")), *model_build.make_batch(built, spec, "meta"), loss_fn)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        return _count(built.twin(torch.device("cpu")), *model_build.make_batch(built, spec, "cpu"), loss_fn)


def _count(model: torch.nn.Module, inputs: Any, targets: Any, loss_fn: Any) -> dict[str, Any]:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        logits = model_build.logits_of(model_build.call(model, inputs))
        loss = loss_fn(logits, targets)
        fwd = counter.get_total_flops()
        loss.backward()
        total = counter.get_total_flops()
    return {"forward_flops": float(fwd), "backward_flops": float(total - fwd)}


def formula(spec: RunSpec, built: Built) -> dict[str, Any]:
    """core.flops' formula for the builtin; 2 x parameters x tokens forward (and twice that backward) else."""
    if built.info.source == "builtin":
        d_model, d_ff, n_layers, _ = spec.dims()
        fwd = forward_flops(d_model, d_ff, n_layers, built.info.vocab_size, spec.batch, spec.ctx)
        note = "full score matrix (core.flops)"
    else:
        fwd = 2.0 * built.info.params * spec.batch * spec.ctx
        note = "not counted: 2 x parameters x tokens leaves attention's score matmuls out"
    return {"forward_flops": fwd, "backward_flops": 2 * fwd, "flops_source": "formula", "attention_flops": note}


def _read() -> dict[str, Any]:
    try:
        doc = json.loads((data_dir() / CACHE_FILE).read_text(encoding="utf-8"))
        return doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        return {}


def _write(doc: dict[str, Any]) -> None:
    from perfconsole.core.store import write_atomic

    try:
        write_atomic(data_dir() / CACHE_FILE, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # a read-only data directory costs a recount next time, nothing else

"""The flags that make a RunSpec, built from its declarations (core.settings, core.settings.declarations): `run`,
`compare`, `sweep`, `ladder` and the console's pre-fill all take them from here, grouped by section.

A sweep's axes take comma lists (`--precision fp32,bf16`, or the plural `--precisions`); a command
whose defaults differ from `run`'s (the ladder) names them in its description. A default decided when
the command runs (the device, the size, the data-parallel wrapper) is None here and filled in by
`spec_from_args`, which is the one mapping from flags to a spec.
"""
from __future__ import annotations

import argparse
from dataclasses import Field
from typing import Any

from perfconsole.core.settings.declarations import SECTIONS, Command, Setting, convert, declared, flag_of, kind_for
from perfconsole.core.settings.kinds import Pairs
from perfconsole.core.settings import RunSpec, SpecError, axes

RUN = Command("run")


def add_spec_arguments(p: Any, command: Command = RUN) -> None:
    """Every declared setting's flag, in sections (flat where `p` is already a group, as the console's)."""
    base = RunSpec()
    grouped = isinstance(p, argparse.ArgumentParser)
    groups = {name: p.add_argument_group(f"{name} settings") if grouped else p for name in SECTIONS}
    for f, s in declared(RunSpec):
        flag = flag_of(f, s)
        if flag is None or f.name in command.omit:
            continue
        if f.name in command.fixed:  # accepted as the one value it takes, so a script may say it
            value = command.fixed[f.name]
            groups[s.section].add_argument(flag, dest=f.name, choices=(value,), default=value,
                                           help=f"{value} only, in `{command.name}`")
            continue
        default = command.defaults.get(f.name, getattr(base, f.name))
        _add(groups[s.section], f, s, flag, default, command.axes and s.axis)
    if command.defaults or command.fixed:
        p.description = ((p.description or "") + " " + command.differs_text(base)).strip()


def _add(g: Any, f: Field, s: Setting, flag: str, default: Any, axis: str | None | bool) -> None:
    """One setting's flag: a comma list for a sweep's axis (each item its kind's, read by `split_axes`), else
    what its kind gives argparse (core.settings.kinds), so a bad value says what the launch form says."""
    text = (f"{', '.join(s.choices)}: " if s.choices else "") + s.help
    if s.default_text:
        text += f" (default: {s.default_text})"
        default = None
    if axis:
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        g.add_argument(flag, f"--{axis}", dest=f.name, default=None if default is None else str(shown),
                       metavar=s.metavar or "A,B", help=f"comma list: {text}")
    else:
        g.add_argument(flag, dest=f.name, help=text, **kind_for(f).arguments(default, s.metavar))


def given(args: argparse.Namespace, command: Command = RUN) -> dict[str, Any]:
    """{field: value} for every setting the flags carry, the command's fixed ones included (axes as text)."""
    out: dict[str, Any] = dict(command.fixed)
    for f, s in declared(RunSpec):
        if flag_of(f, s) is not None and hasattr(args, f.name) and f.name not in command.fixed:
            value = getattr(args, f.name)
            out[f.name] = tuple(value or ()) if isinstance(kind_for(f), Pairs) else value
    return out


def fill_defaults(values: dict[str, Any]) -> dict[str, Any]:
    """The defaults decided now: the device NVML sees, that device's size for the model, ddp for a job."""
    v = dict(values)
    v["device"] = v.get("device") or default_device()
    v["size"] = v.get("size") or default_size(v["device"], v.get("model", "builtin"))
    if "nproc" in v and not v.get("parallel"):
        v["parallel"] = "ddp" if v["nproc"] > 1 else "none"
    return v


def split_axes(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple]]:
    """(the base's values, {field: the axis's values}) from a sweep's flags; a comma list of one value is
    an axis of one."""
    fields = {f.name: f for f, _ in declared(RunSpec)}
    base, out = dict(values), {}
    for name in axes():
        raw = base.pop(name, None)
        if raw is None:
            continue
        items = [x for x in str(raw).split(",") if x.strip()] if isinstance(raw, str) else [raw]
        try:
            out[name] = tuple(convert(fields[name], str(x)) for x in items)
        except ValueError as exc:
            raise SpecError(name, str(exc)) from None
    return base, out


def check_size_given(args: argparse.Namespace, model: str) -> None:
    """A size given to a factory model would be ignored: say so rather than measure something else."""
    size = getattr(args, "size", None)
    if size and RunSpec(model=model).model_kind == "factory":
        raise SpecError("size", f"a factory model sets its own shape, so --size {size} would not be used; "
                                "pass --model-arg KEY=VALUE instead")


def default_device() -> str:
    """cuda where a GPU is visible to NVML, else cpu; decided without importing torch."""
    from perfconsole.core.telemetry.nvml import gpu_count

    return "cuda" if gpu_count() > 0 else "cpu"


def default_size(device: str, model: str = "builtin") -> str:
    """small on a GPU; tiny on the CPU, where small takes seconds a step. An hf architecture's smallest
    published size on a GPU; a factory's size is its own (the field is kept, unused)."""
    if device == "cuda" and model.startswith("hf:"):
        from perfconsole.model.sources.hf_shapes import sizes

        named = [s for s in sizes(model[3:].lower()) if s not in ("tiny", "default", "custom")]
        return named[0] if named else "default"
    return "small" if device == "cuda" else "tiny"


def check_default_size(model: str, size: str, device: str) -> None:
    """A size the user did not give must exist: an hf architecture may lack `tiny`, the CPU's default."""
    from perfconsole.model.sources.hf_shapes import sizes

    allowed = sizes(model[3:].lower()) if model.startswith("hf:") else ()
    if allowed and size not in allowed:
        raise SpecError("size", f"{model} has no {size} shape, the {device} default; name one with --size: "
                                f"{' | '.join(allowed)} (default: its config's own shape)")


def check_device(device: str, nproc: int = 1) -> None:
    """cuda on a machine where NVML sees no GPU, or fewer GPUs than a job's processes, is bad input,
    said before any process starts."""
    from perfconsole.core.telemetry.nvml import gpu_count, visible_gpus

    if device == "cuda" and gpu_count() == 0:
        raise SpecError("device", "cuda, but no NVIDIA GPU is visible on this machine; use cpu")
    if device == "cuda":
        check_gpus(nproc, len(visible_gpus()))


def check_gpus(nproc: int, visible: int) -> None:
    """A job of `nproc` processes takes one GPU each: more than the `visible` ones is bad input."""
    if nproc > visible:
        raise SpecError("nproc", f"{nproc} processes need {nproc} GPUs, but {visible} are visible")


def spec_from_args(args: argparse.Namespace, validate: bool = True, command: Any = None) -> RunSpec:
    """The RunSpec the flags describe; with validate=False the console shows what is wrong in place."""
    values = fill_defaults(given(args, command or RUN))
    spec = RunSpec(**values)
    if validate:
        check_spec(spec, args)
    return spec


def check_spec(spec: RunSpec, args: argparse.Namespace) -> None:
    """Everything about a spec that can be told before any process starts, in the order a user fixes it."""
    from perfconsole.core.launch.model_choice import check as check_model

    check_model(spec.model, spec.model_args)  # an architecture or file that is not there, before its size
    check_size_given(args, spec.model)
    if not getattr(args, "size", None):
        check_default_size(spec.model, spec.size, spec.device)
    spec.validate()
    if getattr(args, "executor", "local") != "slurm":  # under Slurm the job's node has the GPUs
        check_device(spec.device, spec.nproc)

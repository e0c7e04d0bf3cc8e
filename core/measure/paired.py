"""The worker of a paired gate: `python -m perfconsole.core.measure.paired --spec A --spec B` builds both programs
in one process and alternates their steps (A B, B A, A B, ...), so a slow spell of the host (a neighbour, a
clock change, the allocator) lands on both members of a pair and cancels in their ratio (core.gate).

The order inside a pair alternates too: a step that follows the other model's step may find cold caches, and
alternating puts that cost on each side half the time. Every step is timed as the worker times it (bench's
Stepper, pipeline.timed_step, one synchronisation per step) and sent as a `paired` event naming its program;
each program's summary follows its steps. Peak memory is not measured here: both models live in this one
process, so a program's peak would hold the other's weights too (the gate measures memory in processes).
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys

from perfconsole.core import events as ev
from perfconsole.core.measure.worker import EventWriter, begin, end, refuse, serve
from perfconsole.core.settings import RunSpec, SpecError


def tagged(emit: EventWriter, program: int):
    """An emit that wraps each of one program's events as a `paired` event."""
    return lambda event: emit(ev.Paired(program, json.loads(event.to_json())))


def prepare(spec: RunSpec, device, emit) -> tuple:
    """One program's Stepper and FLOPs, built as bench.run builds a model: seeded, FLOPs counted before the
    spec's optimizations go in, then those applied by their converters (core.measure.converters)."""
    import torch

    from perfconsole.core.measure import bench, converters, model_build

    converters.check(spec, device)
    bench.configure_backends(spec.section("numerics"))
    torch.manual_seed(spec.seed)
    emit(ev.Progress("building", spec.model_label()))
    built = model_build.build(spec, device)
    model = built.module
    if spec.mode == "fwd":
        model.eval()
    inputs, targets = model_build.make_batch(built, spec, device)
    described = {**built.info.to_dict(), **model_build.counted_flops(spec, built, inputs, targets, converters.torch_loss)}
    converted = converters.convert(spec, converters.Subject(model, info=built.info), emit)
    emit(ev.ModelReady(described))
    return bench.Stepper(spec, converted.model, device, built.loss or converted.loss, built), described


def process_wide(spec: RunSpec) -> list[str]:
    """The settings a spec turns on that change the whole process, not one model (liger patches transformers'
    classes): in one process they would reach the other program too."""
    return ["kernels"] if spec.kernels != "torch" else []


def run(specs: list[RunSpec], emit: EventWriter, env) -> None:
    import torch

    from perfconsole.core.measure.pipeline import timed_step
    from perfconsole.core.run_summary import compute_summary

    device = torch.device(specs[0].device)
    emits = [tagged(emit, p) for p in range(len(specs))]
    prepared = [prepare(s, device, emits[p]) for p, s in enumerate(specs)]
    ends = [s.warmup + s.steps for s in specs]
    emit(ev.Progress("measuring", f"{max(s.steps for s in specs)} steps of each program, alternating"))
    measured: list[list[ev.Step]] = [[] for _ in specs]
    warm: list[list[ev.Step]] = [[] for _ in specs]
    for k in range(max(ends)):
        for p in (0, 1) if k % 2 == 0 else (1, 0):
            if k < ends[p]:
                step = timed_step(prepared[p][0], k, warmup=k < specs[p].warmup)
                emits[p](step)
                (warm[p] if step.warmup else measured[p]).append(step)
    for p, spec in enumerate(specs):
        summary = compute_summary(spec, measured[p], warm[p], env.gpu_name, spec.peak_tflops, model=prepared[p][1])
        if summary is not None:
            emits[p](ev.SummaryReady(summary.to_dict()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="perfconsole-paired-worker")
    parser.add_argument("--spec", required=True, action="append", help="a RunSpec as JSON; given twice, A then B")
    parser.add_argument("--hold", action="store_true", help="import, then wait for a line on stdin")
    args = parser.parse_args(argv)
    from perfconsole.core.measure import gc_control

    gc_control.space()
    emit = begin(args.hold, lambda: importlib.import_module("perfconsole.core.measure.bench"))
    if emit is None:
        return 0
    try:
        specs = [RunSpec.from_dict(json.loads(text)).validate() for text in args.spec]
    except (SpecError, ValueError, TypeError) as exc:
        return refuse(emit, str(exc))
    if len(specs) != 2 or specs[0].device != specs[1].device or any(s.nproc > 1 for s in specs):
        return refuse(emit, "paired: give two one-process specs on one device")
    if any(process_wide(s) for s in specs):
        return refuse(emit, "paired: not with --kernels, which patches the whole process (run without --paired)")
    gc_control.settle()
    return serve(emit, specs[0].device, specs[0].to_dict(), lambda env: run(specs, emit, env))


if __name__ == "__main__":
    end(main(), sys.argv[1:])

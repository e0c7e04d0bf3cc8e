"""The timed loop: build the model a RunSpec describes, run warm-up and measured steps, emit events.

Timing: on CUDA, events are recorded before the forward and after each phase of every step, so each
phase's time is GPU time between its events; the events of a step are read once the next step is
queued (core.measure.pipeline), so the GPU runs steps back to back as in training, unless the spec
asks for a synchronisation after every step (`step_sync`). On the CPU a monotonic wall clock is read
around each phase. Warm-up steps are timed the same way and flagged, so the cost of few (or zero)
warm-up steps is visible. The forward phase includes the loss; gradients are cleared outside it.

Profiling: a profiled run first measures its steps quietly (no ranges, no profiler), then runs the
same number of steps under the profiler, and reports the second set's cost against the first
(`ProfileOverhead`), so the run's figures are the quiet program's and the profile says how far it
moved. Phase ranges (forward, backward, optimizer_step) are opened around the compiled model, never
inside it: with `--compile` the model's own per-layer ranges stay off, because they break the graph
and the profile would describe another program. On CUDA autograd runs the backward pass on its own
thread, so the backward range is opened there (a hook on the loss opens it, a callback at the end of
the backward closes it): NVTX and torch.profiler both attribute a kernel to the ranges of the
thread that launched it.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager

import torch

from perfconsole.core import events as ev
from perfconsole.core.measure import converters
from perfconsole.core.measure.environment import Environment
from perfconsole.core.measure.pipeline import StepPipeline, steps_text, timed_step
from perfconsole.core.settings import RunSpec
from perfconsole.core.run_summary import compute_summary
from perfconsole.core.measure import (compile_cache, device_peaks, host_time, memory_profile, model_build,
                                      profile_pass, provenance)
from perfconsole.core.measure.start import CLOCK
from perfconsole.model import annotate
from perfconsole.model.sources import Built

if TYPE_CHECKING:  # a rank's (core.measure.worker.run_rank): one process imports no data-parallel code
    from perfconsole.core.measure.job import Job

Emit = Callable[[ev.Event], None]
StepHook = Callable[[int], None]

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
_NULL = annotate.NULL
phase = annotate.phase  # a phase range while profiling (NVTX or record_function), else a shared no-op


def _range_on_autograd_thread(root: torch.Tensor, name: str) -> None:
    """Open `name` on the thread that runs `root`'s backward, for the whole backward pass.

    The hook on the root runs first on that thread; the engine's final callback runs on the same
    thread once the last gradient is written, and closes the range there.
    """
    opened = annotate.factory()
    assert opened is not None
    rng = opened(name)

    def open_range(grad: torch.Tensor) -> torch.Tensor:
        rng.__enter__()
        torch.autograd.Variable._execution_engine.queue_callback(lambda: rng.__exit__(None, None, None))
        return grad

    root.register_hook(open_range)


def build_model(spec: RunSpec, device: torch.device) -> torch.nn.Module:
    """The module the spec names, built on the device (model.sources; core.measure.model_build)."""
    return model_build.build(spec, device).module


def configure_backends(numerics: Any) -> None:
    """The matmul precision of fp32 work, from the spec's numerics section."""
    torch.backends.cuda.matmul.allow_tf32 = numerics.tf32
    torch.backends.cudnn.allow_tf32 = numerics.tf32
    torch.set_float32_matmul_precision("high" if numerics.tf32 else "highest")


class Stepper:
    """One training/inference step of the spec's mode, split into phases for timing."""

    def __init__(self, spec: RunSpec, model: torch.nn.Module, device: torch.device,
                 loss_fn: converters.Loss | None = None, built: Built | None = None,
                 around_step: Callable[[], ContextManager] = contextlib.nullcontext) -> None:
        self.spec = spec
        self.around_step = around_step  # the converters' (compiled autograd: no hook on the loss in its graph)
        self.model = model
        self.built = built
        # The converters' loss (core.measure.converters): the Stepper applies no optimization of its own.
        self.loss_fn = loss_fn or converters.torch_loss
        self.device = device
        if built is not None:
            self.inputs, self.targets = model_build.make_batch(built, spec, device)
        else:
            gen = torch.Generator(device="cpu").manual_seed(spec.seed)
            ids = torch.randint(0, spec.vocab, (spec.batch, spec.ctx + 1), generator=gen)
            self.inputs = ids[:, :-1].to(device)
            self.targets = ids[:, 1:].to(device)
        # A model without its own loss must give (batch, ctx, vocab) logits: checked at the first forward.
        self.check_logits = built is not None and built.loss is None
        self.first = True  # what a user's model raises in its first step is a model error (model_build.first_step)
        dtype = _DTYPES.get(spec.precision)
        self.autocast = (torch.autocast(device.type, dtype=dtype) if dtype is not None
                         else contextlib.nullcontext())
        self.scaler = torch.amp.GradScaler(device.type) if spec.precision == "fp16" and spec.mode != "fwd" else None
        self.optimizer = None
        if spec.mode == "train":
            self.optimizer = converters.make_optimizer(spec.section("optimizations"), model, device)
        # CUDA graphs: tell the graph trees a new step begins, so the last step's outputs may be overwritten.
        self.graphs = spec.compile and spec.compile_mode == "reduce-overhead"

    def zero_grad(self) -> None:
        if self.spec.mode == "fwd":
            return
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        else:
            self.model.zero_grad(set_to_none=True)

    def forward(self) -> torch.Tensor:
        grad = contextlib.nullcontext() if self.spec.mode != "fwd" else torch.no_grad()
        if self.graphs:
            torch.compiler.cudagraph_mark_step_begin()
        first = model_build.first_step(self.built) if self.first else contextlib.nullcontext()
        with grad, phase("forward"), self.autocast, first:
            logits = model_build.logits_of(model_build.call(self.model, self.inputs))
            if self.check_logits:
                assert self.built is not None
                model_build.check_logits(logits, self.spec, self.built.info.vocab_size, self.built.info.name)
                self.check_logits = False
            loss = self.loss_fn(logits, self.targets)
        self.first = False
        return loss

    def backward(self, loss: torch.Tensor) -> None:
        root = self.scaler.scale(loss) if self.scaler else loss
        if annotate.factory() is not None and root.is_cuda and self.around_step is contextlib.nullcontext:
            _range_on_autograd_thread(root, "backward")
            root.backward()
        else:  # on the CPU the calling thread runs the backward itself
            with phase("backward"):
                root.backward()

    def optimizer_step(self) -> None:
        with phase("optimizer_step"):
            if self.scaler:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()


def run(spec: RunSpec, emit: Emit, env: Environment, out_dir: Path | None = None,
        before_step: StepHook | None = None, job: Job | None = None) -> None:
    """Run the spec, emitting progress, step, memory, profile and summary events. Raises on failure,
    after emitting every step whose timings could still be read.

    With `job` (one rank of a data-parallel run, core.measure.job) the model is wrapped in DDP or FSDP
    and every step is gathered on rank 0, which emits the job's steps."""
    CLOCK.begin()
    device = job.device if job else torch.device(spec.device)
    converters.check(spec, device)
    cuda = device.type == "cuda"
    # A GPU's peaks before the model takes memory; a CPU's after the last timed step (core.measure.device_peaks).
    peaks = device_peaks.for_run(spec, device, emit) if cuda else None
    if cuda:
        CLOCK.lap("peaks")
    configure_backends(spec.section("numerics"))
    # Seeded after a GPU's peaks: measuring them draws random matrices, and only a run whose data folder has no
    # peaks yet measures them, so a seed set before would give that run other weights than the next.
    torch.manual_seed(spec.seed)
    building = spec.model_label()
    if spec.model == "builtin":  # the built-in sizes' dimensions, each named
        building += " d_model={} d_ff={} layers={} heads={}".format(*spec.dims())
    emit(ev.Progress("building", building))
    built = model_build.build(spec, device)
    model = built.module
    if spec.mode == "fwd":
        model.eval()
    CLOCK.lap("build")
    # FLOPs are counted before the fast paths go in: liger patches transformers' classes for the whole
    # process, and a twin built after them ran liger's Triton kernels on the meta device (hf:llama 1B with
    # --kernels liger on an H200: a CUDA illegal memory access, raised at the first event after the forward).
    emit(ev.Progress("counting", "FLOPs per step (torch.utils.flop_counter, cached)"))
    inputs, targets = model_build.make_batch(built, spec, device)
    described = {**built.info.to_dict(), **model_build.counted_flops(spec, built, inputs, targets, converters.torch_loss)}
    del inputs, targets
    if spec.profile != "none" and not spec.compile and not built.own_ranges:
        model_build.install_layer_ranges(model)
    CLOCK.lap("flops")
    # Every optimization is its setting's converter, applied in one loop: the weights' dtype, liger, fp8, the
    # attention's kernel, checkpointing, the data-parallel wrapper, torch.compile (core.measure.converters).
    converted = converters.convert(spec, converters.Subject(model, info=built.info, job=job), emit,
                                   CLOCK.lap)
    stepper = Stepper(spec, converted.model, device, built.loss or converted.loss, built, converted.around_step)
    CLOCK.lap("build")  # the optimizer and the batch: the build's too
    emit(ev.ModelReady(described))
    # A memory capture reads peaks between phases: its steps end with a synchronisation.
    in_flight = cuda and not spec.step_sync and not spec.memory
    pipe = StepPipeline(stepper, in_flight=in_flight, before_step=before_step)
    warmup_steps: list[ev.Step] = []
    steps: list[ev.Step] = []

    def kept(step: ev.Step) -> None:
        (warmup_steps if step.warmup else steps).append(step)

    def keep(done: list[ev.Step]) -> None:
        for step in done:
            if job:  # outside the timed region: the step is complete; the job's steps come back a step later
                for job_step in job.publish(step, emit):
                    kept(job_step)
            else:
                emit(step)
                kept(step)

    memory = memory_profile.capture(spec, out_dir)
    cache = compile_cache.Watch() if spec.compile else None  # whether the compile came from the cache
    try:
        emit(ev.Progress("warmup", steps_text(spec.warmup)))
        for index in range(spec.warmup):
            keep(pipe.step(index, warmup=True))
            # A step's phase ends once it is issued (on a GPU its kernels may still run): the measured steps
            # start as they always have, behind the warm-up's last step. A compile runs in the first step.
            CLOCK.lap_steps("first step" if index == 0 else "rest of warm-up")
        if spec.memory:
            keep(pipe.drain())
        emit(ev.StartPhases(CLOCK.take(), cache.verdict() if cache else None))
        if cuda:
            if spec.memory:
                torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        retries_before = memory_profile.alloc_retries(device) if cuda else 0
        emit(ev.Progress("measuring", steps_text(spec.steps)))
        host = host_time.HostWatch().start()
        with memory:
            for index in range(spec.warmup, spec.warmup + spec.steps):
                keep(pipe.step(index, warmup=False, after_phase=memory.after_phase))
            keep(pipe.drain())
            host_seen = host.stop()
            for job_step in job.flush(emit) if job else []:
                kept(job_step)
    except BaseException:
        if job is None:
            keep(pipe.salvage())
        else:  # the steps this rank had sent still reach rank 0; the one in flight cannot be gathered any more
            for job_step in job.flush_failed(emit):
                kept(job_step)
        raise
    emit(ev.Provenance(**provenance.read().to_dict()))  # the process that timed the headline's steps, as it is now
    emit(host_seen)

    peak_alloc = peak_reserved = None
    if cuda:
        peak_alloc = torch.cuda.max_memory_allocated() / 2**20
        peak_reserved = torch.cuda.max_memory_reserved() / 2**20
        mem_event = memory.event(peak_alloc, peak_reserved)
        # A memory capture resets the peak counters per phase, so its event holds the run's peak.
        peak_alloc, peak_reserved = mem_event.peak_allocated_mib, mem_event.peak_reserved_mib
        retries = memory_profile.alloc_retries(device) - retries_before
        if job:
            retries = job.most_alloc_retries(retries)
        if retries:
            emit(ev.Progress("memory", memory_profile.retry_warning(retries, spec.steps)))
        emit(dataclasses.replace(mem_event, alloc_retries=retries))
    index = spec.warmup + spec.steps
    if job:
        job.after_quiet(lambda: timed_step(stepper, index, warmup=False),
                        lambda n: _steps_apart(stepper, in_flight, index, n), emit)
    busy = None
    if spec.profile != "none":
        busy = profile_pass.profiled_steps(spec, pipe, steps, emit, job.out_dir(out_dir) if job else out_dir, index, job)
    if not cuda:
        peaks = device_peaks.for_run(spec, device, emit)
    summary = compute_summary(spec, steps, warmup_steps, env.gpu_name, spec.peak_tflops,
                              peak_alloc, peak_reserved, peaks, busy, job.comm_free_ms if job else None,
                              job.comm_steps_ms if job else None, described)
    device_peaks.refute_peaks(summary.speed_of_light, lambda line: emit(ev.Progress("peaks", line)))
    emit(ev.SummaryReady(summary.to_dict()))


def _steps_apart(stepper: Stepper, in_flight: bool, index: int, n: int) -> list[ev.Step]:
    """`n` more steps, queued as the measured ones were, kept out of the record's steps."""
    pipe = StepPipeline(stepper, in_flight=in_flight)
    done: list[ev.Step] = []
    for i in range(n):
        done += pipe.step(index + i, warmup=False)
    return done + pipe.drain()

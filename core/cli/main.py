"""The headless CLI: `perfconsole run | sweep | attention | import | export`.

Each sub-command lives in its own module with `add_parser(subparsers)`; the parser it adds sets
`func(args) -> int`. Bad input exits 2 with one line on stderr and no traceback. With no sub-command
the console starts; that dispatch lives in perfconsole.tui.main, since core never imports the tui.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

from perfconsole.core import store
from perfconsole.core.spec import (ATTENTIONS, COMM_HOOKS, COMPILE_MODES, DEVICES, KERNELS, MODES, OPTIMIZE_DDP,
                                   OPTIMIZERS, PARALLELS, PRECISIONS, PROFILERS, SIZE_NAMES, WEIGHTS, RunSpec,
                                   SpecError)

COMMANDS = [
    "perfconsole.core.cli.run",
    "perfconsole.core.cli.export",
    "perfconsole.core.cli.profile_import",
    "perfconsole.core.cli.sweep",
    "perfconsole.core.cli.attention",
    "perfconsole.core.cli.compare",
    "perfconsole.core.cli.ladder",
]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_OOM, EXIT_CANCELLED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit code 2."""


class _Help(argparse.HelpFormatter):
    """Help that shows each flag's default where it has one and the help text does not say it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if ("default" not in text and action.default not in (None, False, argparse.SUPPRESS)
                and action.option_strings and not isinstance(action, argparse._StoreFalseAction)):
            # a store_false flag's default, True, is the setting it turns off: "(default: True)" misreads
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Help)
        # No prefixes: `ladder --mode` read as an abbreviation was "ambiguous: --model, --model-arg".
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, no usage dump
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def add_spec_arguments(p: argparse.ArgumentParser, defaults: RunSpec | None = None) -> None:
    """The flags that make a RunSpec; shared by `run`, the console's launch form and sweeps."""
    d = defaults or RunSpec()
    add_model_arguments(p, d)
    p.add_argument("--size", default=None if defaults is None else d.size,
                   help=f"model size: {', '.join(SIZE_NAMES)} for builtin; an hf architecture's own sizes "
                        "(llama: tiny, 1B, 3B, 8B; gpt2: tiny, 124M, 355M, 774M, 1.5B; qwen2: tiny, 0.5B, 1.5B, 3B, 7B; "
                        "qwen3: tiny, 0.6B, 1.7B, 4B, 8B; any: default, custom); unused by a factory "
                        "(default: small on cuda, tiny on cpu; hf: the smallest published size on cuda)")
    p.add_argument("--ctx", type=int, default=d.ctx, help="context length (tokens)")
    p.add_argument("--batch", type=int, default=d.batch, help="batch size")
    p.add_argument("--precision", default=d.precision, help=f"{', '.join(PRECISIONS)} (bf16/fp16 via autocast)")
    p.add_argument("--mode", default=d.mode, help=f"{', '.join(MODES)}: inference, forward+backward, full train step")
    p.add_argument("--warmup", type=int, default=d.warmup, help="warm-up steps, timed and reported apart (0 allowed)")
    p.add_argument("--steps", type=int, default=d.steps, help="measured steps")
    p.add_argument("--repeat", type=int, default=d.repeat, metavar="N",
                   help="run the spec in N fresh processes, one after the other, for the spread between them")
    p.add_argument("--device", default=None, help=f"{', '.join(DEVICES)} (default: cuda when available, else cpu)")
    p.add_argument("--attention", default=d.attention, help=f"{', '.join(ATTENTIONS)}")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in fp32")
    p.add_argument("--step-sync", action="store_true",
                   help="synchronise after every step (as a loop that reads the loss each step); by default "
                        "the next step is queued while the GPU finishes the last")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument("--profile", default=d.profile, help=f"{', '.join(PROFILERS)}")
    p.add_argument("--memory", action="store_true", help="record CUDA memory history (memory_viz snapshot)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the GPU's dense peak, for MFU and speed of light (default: measured)")
    p.add_argument("--peak-gbps", type=float, default=None, help="memory bandwidth for speed of light (default: measured)")
    p.add_argument("--optimizer", default=d.optimizer, help=f"AdamW: {', '.join(OPTIMIZERS)}")
    p.add_argument("--compile-mode", default=d.compile_mode, help=f"with --compile: {', '.join(COMPILE_MODES)}")
    p.add_argument("--kernels", default=d.kernels, help=f"{', '.join(KERNELS)} (liger needs perfconsole[fast])")
    p.add_argument("--fp8", action="store_true", help="torchao float8 matmuls (perfconsole[fast], compute capability >= 8.9)")
    p.add_argument("--weights", default=d.weights, help=f"{', '.join(WEIGHTS)}: bf16 keeps parameters, gradients and "
                   "AdamW state in bf16 (no fp32 master copy: rounds differently; needs --precision bf16)")
    for dim in ("d-model", "d-ff", "n-layers", "n-heads"):
        p.add_argument(f"--{dim}", type=int, default=None, help="custom size only")
    add_parallel_arguments(p, d)


MODEL_HELP = ("builtin (perfconsole's Transformer), hf:ARCH (a transformers architecture with random weights, "
              "nothing downloaded: llama, qwen2, qwen3, gpt2, ...; needs perfconsole[hf]), or PATH.py:FACTORY / "
              "package.module:FACTORY (your code: FACTORY(ctx=, vocab_size=, **model_args) returns an nn.Module "
              "mapping (batch, ctx) token ids to logits; docs/models.md)")


def add_model_arguments(p: argparse.ArgumentParser, d: RunSpec | None = None) -> None:
    """--model and --model-arg: where the model comes from (model.sources), for run, sweep, ladder, compare."""
    d = d or RunSpec()
    p.add_argument("--model", default=d.model, metavar="MODEL", help=MODEL_HELP)
    p.add_argument("--model-arg", action="append", default=list(d.model_args), metavar="KEY=VALUE",
                   help="for hf: a config field (num_key_value_heads=4); for a factory: a keyword argument; repeatable")


def add_parallel_arguments(p: argparse.ArgumentParser, d: RunSpec) -> None:
    """Data parallel: N processes under torchrun, one GPU each (gloo processes on the CPU)."""
    p.add_argument("--nproc", type=int, default=d.nproc, metavar="N",
                   help="processes in the job, one GPU each on cuda, each with --batch (weak scaling)")
    p.add_argument("--parallel", default=None, help=f"{', '.join(PARALLELS)} (default: ddp with --nproc > 1)")
    p.add_argument("--bucket-mb", type=float, default=d.bucket_mb, metavar="MB",
                   help="DDP's gradient bucket size, bucket_cap_mb (default: DDP's 25)")
    p.add_argument("--grad-as-bucket-view", action="store_true", help="DDP's gradient_as_bucket_view")
    p.add_argument("--comm-hook", default=d.comm_hook, help=f"{', '.join(COMM_HOOKS)}: DDP's bf16_compress_hook")
    p.add_argument("--no-reshard", dest="reshard", action="store_false",
                   help="FSDP: keep each block's parameters gathered from its forward to its backward "
                        "(reshard_after_forward=False): one all-gather fewer per block, more memory")
    p.add_argument("--fsdp-bf16", action="store_true",
                   help="FSDP's mixed precision (MixedPrecisionPolicy): gather parameters and reduce-scatter "
                        "gradients in bf16, half the bytes; the fp32 shards stay the master copy (precision bf16)")
    p.add_argument("--optimize-ddp", default=d.optimize_ddp, metavar="MODE",
                   help=f"{', '.join(OPTIMIZE_DDP)}: how torch.compile treats DDP (torch._dynamo.config.optimize_ddp): "
                        "split the graph at DDP's buckets, or compile it whole (needs --compile)")
    p.add_argument("--scaling", action="store_true",
                   help="also run the one-process spec first, for weak-scaling efficiency")


def default_device() -> str:
    """cuda where a GPU is visible to NVML, else cpu; decided without importing torch."""
    from perfconsole.core.telemetry.nvml import gpu_count

    return "cuda" if gpu_count() > 0 else "cpu"


def add_force_argument(p: argparse.ArgumentParser) -> None:
    """--force, beside a command's --save FILE or -o FILE."""
    p.add_argument("--force", action="store_true",
                   help="replace the file to write if it exists (without it an existing file is refused, "
                        "before any work)")


def save_path(arg: str | None, force: bool = False) -> Path | None:
    """The --save FILE (or -o FILE) of a command, checked before any work starts: its directory
    exists and takes a new file, and an existing file is replaced only with `force` (--force), so a bad
    path loses nothing measured and a typo replaces nothing measured before."""
    if not arg:
        return None
    try:
        return store.writable_file(arg, overwrite=force)
    except store.FileExists as exc:
        raise UsageError(f"{exc.path}: exists; give --force to replace it") from exc
    except store.SnapshotError as exc:
        raise UsageError(str(exc)) from exc


def deliver(text: str, table: Callable[[], Any], save: Path | None, as_json: bool, err: Any, stop: Any,
            code: int) -> int:
    """The end of a measuring command: save the snapshot `text`, then print it (--json) or `table()` (where
    that is None, nothing: the run measured nothing and stderr said why).

    Returns the exit code: 128 + a stop signal, else `code`, or an error when the save failed.
    """
    saved = save is not None and save_snapshot(save, text)
    with reader_may_be_gone():
        if saved:
            err.print(f"saved {save}", markup=False, highlight=False, soft_wrap=True)  # a path is one line
        if as_json:
            print(text, end="", flush=True)
        else:
            from rich.console import Console

            shown = table()
            if shown is not None:
                Console().print(shown)
    return stop.exit_code(code if saved or save is None else EXIT_ERROR)


def save_snapshot(path: Path, text: str) -> bool:
    """Write a snapshot after the work; a failure (the directory went away since `save_path` checked
    it) is one line on stderr, and the caller still prints what was measured."""
    try:
        store.write_atomic(path, text)
    except OSError as exc:
        with contextlib.suppress(OSError):
            print(f"perfconsole: error: {path}: cannot save ({exc.strerror or exc})", file=sys.stderr)
        return False
    return True


@contextlib.contextmanager
def reader_may_be_gone() -> Iterator[None]:
    """Printing inside may fail because the reader has gone (`| head`, a dropped SSH session): that is
    no error, since what was measured is already saved. Output goes nowhere from then on."""
    try:
        yield
    except OSError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            for stream in (sys.stdout, sys.stderr):
                os.dup2(devnull, stream.fileno())


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
    if device == "cuda" and nproc > len(visible_gpus()):
        raise SpecError("nproc", f"{nproc} processes need {nproc} GPUs, but {len(visible_gpus())} are visible")


def spec_from_args(args: argparse.Namespace, validate: bool = True) -> RunSpec:
    """The RunSpec the flags describe; with validate=False the console shows what is wrong in place."""
    device = args.device or default_device()
    spec = RunSpec(
        model=args.model, model_args=tuple(args.model_arg or ()),
        size=args.size or default_size(device, args.model), ctx=args.ctx, batch=args.batch, precision=args.precision, mode=args.mode,
        warmup=args.warmup, steps=args.steps, repeat=args.repeat, device=device,
        attention=args.attention, compile=args.compile, tf32=args.tf32, step_sync=args.step_sync,
        seed=args.seed, vocab_size=args.vocab_size, profile=args.profile, memory=args.memory,
        peak_tflops=args.peak_tflops, d_model=args.d_model, d_ff=args.d_ff,
        n_layers=args.n_layers, n_heads=args.n_heads, optimizer=args.optimizer, compile_mode=args.compile_mode,
        kernels=args.kernels, fp8=args.fp8, weights=args.weights, peak_gbps=args.peak_gbps, nproc=args.nproc,
        parallel=args.parallel or ("ddp" if args.nproc > 1 else "none"), bucket_mb=args.bucket_mb,
        grad_as_bucket_view=args.grad_as_bucket_view, comm_hook=args.comm_hook, scaling=args.scaling,
        reshard=getattr(args, "reshard", True), fsdp_bf16=getattr(args, "fsdp_bf16", False),
        optimize_ddp=getattr(args, "optimize_ddp", "ddp_optimizer"),
    )
    if validate:
        from perfconsole.core.launch.model_choice import check as check_model

        check_model(spec.model, spec.model_args)  # an architecture or file that is not there, before its size
        if not args.size:
            check_default_size(spec.model, spec.size, device)
        spec.validate()
        if getattr(args, "executor", "local") != "slurm":  # under Slurm the job's node has the GPUs
            check_device(spec.device, spec.nproc)
    return spec


def build_parser(console_options: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.ArgumentParser:
    # No abbreviations: the console's flags would swallow sub-command flags (`attention --d` as --device).
    parser = _Parser(prog="perfconsole", allow_abbrev=False,
                     description="Benchmark and profile Transformer LMs on NVIDIA GPUs. "
                                 "With no command, opens the console.")
    if console_options:
        console_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None,
         console: tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]] | None = None) -> int:
    parser = build_parser(console[0] if console else None)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    if args.command is not None and args.command in argv:
        before = [a for a in argv[:argv.index(args.command)] if a.startswith("-")]
        if before:  # the console's flags: the command's own defaults would replace them silently
            parser.error(f"{', '.join(before)}: given before {args.command!r}, the console's flags, which "
                         f"{args.command!r} never sees; give {args.command}'s flags after it")
    try:
        if args.command is None:
            if console is None:
                parser.print_help()
                return EXIT_USAGE
            return console[1](args)
        return args.func(args)
    except (SpecError, UsageError) as exc:
        print(f"perfconsole: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED


if __name__ == "__main__":
    # Run as `python -m`, this file is `__main__`; the subcommands import `perfconsole.core.cli.main`, whose
    # UsageError must be the one caught above, so the command runs from that module.
    from perfconsole.core.cli import main as _cli

    sys.exit(_cli.main())

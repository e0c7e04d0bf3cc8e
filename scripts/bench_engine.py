"""The engine's performance figures on a GPU, each beside an independent timing of the same step.

    python3 scripts/bench_engine.py --part targets --out docs/results/engine_targets.md
    python3 scripts/bench_engine.py --part sizes --out docs/results/engine_sizes_ctx512.md

`targets`: 2.7B, ctx 512, batch 4, bf16, train: eager with naive attention, and sdpa + torch.compile.
`sizes`: fp32 and bf16 for all five sizes at ctx 512 in fwd, fwd_bwd and train.
`check`: every size, bf16, fwd and train, perfconsole beside the independent timing.
Every run is a perfconsole child process (as `perfconsole run` makes it); the independent timing is
scripts/independent_timing.py in a child of its own.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

from perfconsole.core.launch.launcher import Launch
from perfconsole.core.record import RunRecord
from perfconsole.core.settings import RunSpec
from perfconsole.model.config import SIZES

HERE = pathlib.Path(__file__).resolve().parent


def run(spec: RunSpec) -> RunRecord:
    r = RunRecord(spec)
    for e in Launch(spec).events():
        r.apply(e)
    return r


def independent(spec: RunSpec) -> dict | None:
    argv = [sys.executable, str(HERE / "independent_timing.py"), "--size", spec.size, "--ctx", str(spec.ctx),
            "--batch", str(spec.batch), "--precision", spec.precision, "--mode", spec.mode,
            "--attention", spec.attention, "--warmup", str(spec.warmup), "--steps", str(spec.steps)]
    if spec.compile:
        argv.append("--compile")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def f(v, d=1):
    return "-" if v is None else f"{v:,.{d}f}"


def targets(lines: list[str]) -> None:
    base = RunSpec(size="2.7B", ctx=512, batch=4, precision="bf16", mode="train", warmup=5, steps=20, device="cuda")
    lines += ["| config | status | median ms | mean ms | std ms | independent median ms (CUDA events) | "
              "independent wall ms | diff | tokens/s | MFU | peak alloc MiB | target (H200) |",
              "| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |"]
    for label, spec, target in (("eager, naive attention", base, "<= 235 ms"),
                                ("sdpa + torch.compile", base.with_(attention="sdpa", compile=True), "<= 160 ms")):
        r = run(spec)
        ind = independent(spec) if r.status == "ok" else None
        sm = r.summary
        med = sm.total_ms.median if sm else None
        diff = f"{(med / ind['event_median_ms'] - 1):+.1%}" if ind and med else "-"
        lines.append(f"| {label} | {r.status} | {f(med)} | {f(sm and sm.total_ms.mean)} | {f(sm and sm.total_ms.std, 2)} | "
                     f"{f(ind and ind['event_median_ms'])} | {f(ind and ind['wall_median_ms'])} | {diff} | "
                     f"{f(sm and sm.tokens_per_s, 0)} | {'-' if not sm or sm.mfu is None else f'{sm.mfu:.1%}'} | "
                     f"{f(sm and sm.peak_allocated_mib, 0)} | {target} |")
        print(lines[-1], flush=True)


def sizes(lines: list[str], warmup: int, steps: int) -> None:
    lines += ["| size | d_model | d_ff | layers | heads | mode | precision | status | fwd mean ms | fwd std | "
              "bwd mean ms | bwd std | opt mean ms | total mean ms | total std | tokens/s | MFU | peak alloc MiB |",
              "| --- | --: | --: | --: | --: | --- | --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |"]
    for size in ("small", "medium", "large", "xl", "2.7B"):
        d, ff, nl, nh = SIZES[size]
        for mode in ("fwd", "fwd_bwd", "train"):
            for prec in ("fp32", "bf16"):
                r = run(RunSpec(size=size, ctx=512, batch=4, precision=prec, mode=mode, warmup=warmup, steps=steps,
                                device="cuda"))
                sm = r.summary

                def st(name, attr, sm=sm):
                    s = getattr(sm, name, None) if sm else None
                    return f(getattr(s, attr), 2) if s else "-"

                lines.append(f"| {size} | {d} | {ff} | {nl} | {nh} | {mode} | {prec} | {r.status} | "
                             f"{st('forward_ms', 'mean')} | {st('forward_ms', 'std')} | {st('backward_ms', 'mean')} | "
                             f"{st('backward_ms', 'std')} | {st('optimizer_ms', 'mean')} | {st('total_ms', 'mean')} | "
                             f"{st('total_ms', 'std')} | {f(sm and sm.tokens_per_s, 0)} | "
                             f"{'-' if not sm or sm.mfu is None else f'{sm.mfu:.1%}'} | "
                             f"{f(sm and sm.peak_allocated_mib, 0)} |")
                print(lines[-1], flush=True)


def check(lines: list[str]) -> None:
    """perfconsole's median against the independent timing for every size, bf16, fwd and train."""
    lines += ["| size | mode | perfconsole median ms | independent median ms (CUDA events) | independent wall ms | diff |",
              "| --- | --- | --: | --: | --: | --: |"]
    for size in ("small", "medium", "large", "xl", "2.7B"):
        for mode in ("fwd", "train"):
            spec = RunSpec(size=size, ctx=512, batch=4, precision="bf16", mode=mode, warmup=5, steps=20, device="cuda")
            r = run(spec)
            ind = independent(spec) if r.status == "ok" else None
            med = r.summary.total_ms.median if r.summary else None
            diff = f"{(med / ind['event_median_ms'] - 1):+.1%}" if ind and med else "-"
            lines.append(f"| {size} | {mode} | {f(med, 2)} | {f(ind and ind['event_median_ms'], 2)} | "
                         f"{f(ind and ind['wall_median_ms'], 2)} | {diff} |")
            print(lines[-1], flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--part", choices=("targets", "sizes", "check"), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    import torch

    t0 = time.time()
    lines = [f"# perfconsole engine: {a.part}", "",
             f"Device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}. "
             f"Batch 4, ctx 512. Times in ms (CUDA events per phase, synchronised per step).", "",
             f"Command: `python3 scripts/bench_engine.py {' '.join(sys.argv[1:])}`", ""]
    if a.part == "targets":
        lines.append("5 warm-up + 20 measured steps per run; the independent timing repeats the same step in its "
                     "own process (scripts/independent_timing.py).")
        lines.append("")
        targets(lines)
    elif a.part == "check":
        lines.append("bf16, 5 warm-up + 20 measured steps. Each row is two processes: perfconsole's worker and "
                     "scripts/independent_timing.py. Where a step is short, it is bound by kernel launches on the "
                     "host, and two processes differ by host jitter rather than by measurement.")
        lines.append("")
        check(lines)
    else:
        lines.append(f"{a.warmup} warm-up + {a.steps} measured steps per cell. fwd is inference (no_grad); "
                     "the forward phase includes the loss. MFU against the dense peak of the GPU for the precision.")
        lines.append("")
        sizes(lines, a.warmup, a.steps)
    lines += ["", f"Wall time of the script: {time.time() - t0:.0f} s."]
    pathlib.Path(a.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

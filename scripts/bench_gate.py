"""Does `perfconsole gate` catch a step a tenth slower, and never call the same program a regression?

Makes a git repository with a model file at two commits (the second adds one matmul, about 10 % more work a
step), then runs N gates of base against slower (`--rev BASE --rev SLOWER`) and N of base against itself,
alternating so the host's load falls on both kinds alike, each with the default budget. Prints the count of each
verdict, each gate's ratio and interval, and the wall times, as Markdown (docs/results/gate_cpu.md).

    .venv/bin/python scripts/bench_gate.py --gates 10 --paired
    .venv/bin/python scripts/bench_gate.py --gates 10            # processes interleaved
    .venv/bin/python scripts/bench_gate.py --gates 10 --compare-modes   # A against A, both modes in turn: widths

`--json-out FILE` is written after every gate; `--deadline SECONDS` starts no round that would end past it (by the
longest round so far), so a device call with a time limit still ends with its table.

On a GPU (`--device cuda`) the factory is wider (2048, bf16, ctx 512, batch 8: a step of a few milliseconds, paced
by the host) so the one more matmul is still about a tenth of the work, and `--real FIELD=A,B` adds gates of a
real change of the builtin model (say `--real optimizer=fused,forloop` at `--real-size medium`), B the change:

    source scripts/device_env.sh && python3 scripts/bench_gate.py --device cuda --gates 10 --paired \
        --real optimizer=fused,forloop
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

MODEL = '''"""A stack of square layers: the factory perfconsole calls."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, vocab_size: int, width: int, depth: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab_size, width)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


def build(ctx: int, vocab_size: int, width: int = 256, depth: int = 9) -> nn.Module:
    return Net(vocab_size, width, depth)
'''
# The change under test: one more width x width matmul after the stack (nine layers and the head: about 10 % more).
SLOWER = MODEL.replace("        return self.head(x)\n",
                       "        x = torch.relu(x @ self.layers[0].weight)  # the slowdown\n        return self.head(x)\n")
# Run flags that keep its steps small on a CPU; on a GPU, a wider stack in bf16.
FLAGS = ["--device", "cpu", "--vocab-size", "256", "--ctx", "64", "--batch", "4", "--warmup", "3", "--steps", "15"]
GPU_FLAGS = ["--device", "cuda", "--precision", "bf16", "--vocab-size", "256", "--model-arg", "width=2048", "--ctx",
             "512", "--batch", "8", "--warmup", "3", "--steps", "15"]
PC = [sys.executable, "-m", "perfconsole.tui.main"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=gate@example.com", "-c", "user.name=gate", *args], cwd=repo,
                          check=True, capture_output=True, text=True).stdout.strip()


def make_repo(folder: Path) -> tuple[Path, str, str]:
    """The repository, and the base and slower commits' hashes; the model file is `model.py` at its root."""
    folder.mkdir(parents=True, exist_ok=True)
    git(folder, "init", "--quiet")
    (folder / "model.py").write_text(MODEL, encoding="utf-8")
    git(folder, "add", "model.py")
    git(folder, "commit", "--quiet", "-m", "model")
    base = git(folder, "rev-parse", "HEAD")
    (folder / "model.py").write_text(SLOWER, encoding="utf-8")
    git(folder, "commit", "--quiet", "-am", "one more matmul")
    return folder, base, git(folder, "rev-parse", "HEAD")


def gate_argv(repo: Path, a: str, b: str, flags: list[str], *extra: str) -> list[str]:
    return [*PC, "gate", "--model", f"{repo / 'model.py'}:build", "--rev", a, "--rev", b, *flags, *extra]


def real_argv(vary: str, size: str, *extra: str) -> list[str]:
    """A gate of the builtin model on the GPU: A and B the two values of `vary`."""
    return [*PC, "gate", "--size", size, "--device", "cuda", "--precision", "bf16", "--mode", "train", "--attention",
            "sdpa", "--ctx", "512", "--batch", "8", "--warmup", "3", "--steps", "15", "--vary", vary, *extra]


def one(argv: list[str]) -> dict:
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - start
    data = json.loads(done.stdout)["data"] if done.stdout.strip() else {}
    step = next((v for v in data.get("verdicts", []) if v["metric"] == "step time"), {})
    return {"code": done.returncode, "verdict": data.get("verdict", f"exit {done.returncode}"), "wall_s": wall,
            "rounds": data.get("rounds"), "ratio": step.get("estimate"), "low": step.get("low"), "high": step.get("high"),
            "stopped": data.get("stopped"), "stderr": done.stderr[-300:] if done.returncode not in (0, 1, 3) else ""}


def save(args: argparse.Namespace, payload: dict) -> None:
    """Every gate's figures so far to --json-out, written whole or not at all (after each gate: a call cut short
    keeps what it measured)."""
    if args.json_out:
        out = Path(args.json_out)
        part = out.with_name(out.name + ".part")
        part.write_text(json.dumps(payload, indent=1) + "\n")
        os.replace(part, out)


def gate_rounds(args: argparse.Namespace):
    """The rounds' numbers, 0 to --gates - 1, stopping before a round that would end past --deadline (seconds from
    the first round's start), by the longest round yet; says so when it stops early."""
    began, longest = time.monotonic(), 0.0
    for i in range(args.gates):
        if args.deadline is not None and time.monotonic() - began + longest > args.deadline:
            print(f"stopped after {i} of {args.gates} rounds: the next would end past --deadline "
                  f"{args.deadline:.0f} s", file=sys.stderr, flush=True)
            return
        start = time.monotonic()
        yield i
        longest = max(longest, time.monotonic() - start)


def compare_modes(args: argparse.Namespace) -> int:
    """The same revision twice, `--gates` gates in each mode, the modes in turn (the host's slow spells fall on both):
    how wide each mode's interval of B/A is, where nothing differs. Paired steps alternate in one process, so the
    host's spells cancel in each pair; processes carry the spread between processes."""
    flags = GPU_FLAGS if args.device == "cuda" else FLAGS
    modes = {"paired": ["--json", "--paired"], "processes": ["--json"]}
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        repo, base, _ = make_repo(Path(tmp) / "repo")
        results: dict[str, list[dict]] = {m: [] for m in modes}
        for i in gate_rounds(args):
            for mode in list(modes) if i % 2 == 0 else list(modes)[::-1]:
                r = one(gate_argv(repo, base, base, flags, *modes[mode]))
                results[mode].append(r)
                print(f"{mode} {len(results[mode])}: {r['verdict']} {r['ratio'] or 0:.3f} [{r['low'] or 0:.3f}, "
                      f"{r['high'] or 0:.3f}] {r['rounds']} rounds {r['wall_s']:.1f} s {r['stderr']}",
                      file=sys.stderr, flush=True)
                save(args, {"compare_modes": True, "device": args.device, "gates": results})
    widths = {m: [r["high"] - r["low"] for r in rs if r["low"] is not None] for m, rs in results.items()}
    # a gate stops once it decides, so the modes' intervals come from different numbers of rounds; an interval
    # narrows about as 1/sqrt(rounds), so width x sqrt(rounds) compares the modes round for round
    per_round = {m: [(r["high"] - r["low"]) * r["rounds"] ** 0.5 for r in rs if r["low"] is not None and r["rounds"]]
                 for m, rs in results.items()}
    done = len(results["processes"])
    print(f"### the same revision twice, {done} gates in each mode, in turn ({args.device})\n")
    print("| mode | verdicts | median interval width | widths | median rounds | median width x sqrt(rounds) "
          "| median wall (s) |")
    print("|---|---|---:|---|---:|---:|---:|")
    for mode, rs in results.items():
        verdicts = ", ".join(f"{v} {n}" for v, n in Counter(r["verdict"] for r in rs).items())
        w = widths[mode]
        rounds = [r["rounds"] for r in rs if r["rounds"] is not None]
        print(f"| {mode} | {verdicts} | {statistics.median(w) if w else float('nan'):.4f} | "
              f"{', '.join(f'{x:.4f}' for x in w)} | {statistics.median(rounds) if rounds else '-'} | "
              f"{statistics.median(per_round[mode]) if per_round[mode] else float('nan'):.4f} | "
              f"{statistics.median(r['wall_s'] for r in rs):.1f} |")
    if widths["paired"] and widths["processes"]:
        print(f"\nprocesses' median width / paired's: "
              f"{statistics.median(widths['processes']) / statistics.median(widths['paired']):.2f}; round for round "
              f"(width x sqrt(rounds)): "
              f"{statistics.median(per_round['processes']) / statistics.median(per_round['paired']):.2f}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gates", type=int, default=10, help="gates of each kind")
    p.add_argument("--paired", action="store_true", help="gate with --paired")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--real", default=None, metavar="FIELD=A,B", help="on a GPU, also gates of this change")
    p.add_argument("--real-size", default="medium")
    p.add_argument("--json-out", default=None, metavar="FILE", help="every gate's figures, as JSON (after each gate)")
    p.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                   help="start no round of gates that would end past this many seconds from the start, by the "
                        "longest round yet, so a device call with a limit ends with its table")
    p.add_argument("--compare-modes", action="store_true",
                   help="instead: the same revision against itself, paired and in processes in turn, N gates each, "
                        "and their 95 %% intervals' widths side by side")
    args = p.parse_args()
    if args.compare_modes:
        return compare_modes(args)
    if args.real and args.device != "cuda":
        p.error("--real is a GPU gate: give --device cuda")
    extra = ["--json", *(["--paired"] if args.paired else [])]
    flags = GPU_FLAGS if args.device == "cuda" else FLAGS
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        repo, base, slower = make_repo(Path(tmp) / "repo")
        results: dict[str, list[dict]] = {"slower": [], "same": [], **({"real": []} if args.real else {})}
        for i in gate_rounds(args):
            kinds = [("slower", slower), ("same", base), *([("real", None)] if args.real else [])]
            for kind, b in kinds if i % 2 == 0 else kinds[::-1]:
                argv = real_argv(args.real, args.real_size, *extra) if kind == "real" else gate_argv(repo, base, b, flags, *extra)
                r = one(argv)
                results[kind].append(r)
                print(f"{kind} {len(results[kind])}: {r['verdict']} {r['ratio'] or 0:.3f} "
                      f"[{r['low'] or 0:.3f}, {r['high'] or 0:.3f}] {r['rounds']} rounds {r['wall_s']:.1f} s {r['stderr']}",
                      file=sys.stderr, flush=True)
                save(args, {"mode": "paired" if args.paired else "processes", "device": args.device,
                            "gates": results})
    mode = "paired" if args.paired else "processes"
    print(f"### {mode}: {len(results['same'])} gates of each kind\n")
    print("| gates | regression | inconclusive | same | improved | other | wall median (s) | wall max (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for kind, rs in results.items():
        c = Counter(r["verdict"] for r in rs)
        other = len(rs) - sum(c[k] for k in ("regression", "inconclusive", "same", "improved"))
        walls = [r["wall_s"] for r in rs]
        label = {"slower": "base vs one more matmul", "same": "base vs base"}.get(kind, f"{args.real} ({args.real_size})")
        print(f"| {label} | {c['regression']} | {c['inconclusive']} | {c['same']} | {c['improved']} | {other} "
              f"| {statistics.median(walls):.1f} | {max(walls):.1f} |")
    print("\n| gate | verdict | B/A | 95% interval | rounds | stopped | wall (s) |\n|---|---|---:|---|---:|---|---:|")
    for kind, rs in results.items():
        for i, r in enumerate(rs):
            interval = f"[{r['low']:.3f}, {r['high']:.3f}]" if r["low"] is not None else "-"
            ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
            print(f"| {kind} {i + 1} | {r['verdict']} | {ratio} | {interval} | {r['rounds']} | {r['stopped']} | {r['wall_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

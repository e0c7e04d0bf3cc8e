"""How long Python's collector runs in each eager train step of a model as deep as xl (48 blocks), kept narrow so
the CPU's math is quick: the collector's time is the host's, the same whatever device runs the kernels.

    .venv/bin/python scripts/gc_step_probe.py default    # Python's thresholds
    .venv/bin/python scripts/gc_step_probe.py settle     # as perfconsole's worker: gc.freeze, thresholds 50,000/20/20

Prints the step's median (ms) and the collector's time a step (mean and max, ms, from gc.callbacks), over 30 steps
after 3 warm-up steps, with torch's compiler stack imported as a worker has it."""
import dataclasses
import gc
import statistics
import sys
import time

import torch
import torch._dynamo  # noqa: F401  (the objects a worker's imports leave for the collector to walk)
import torch._inductor  # noqa: F401
import torch.nn.functional as F

from perfconsole.model.config import config_for
from perfconsole.model.transformer import TransformerLM

mode = sys.argv[1] if len(sys.argv) > 1 else "default"
if mode not in ("default", "settle"):
    sys.exit("usage: gc_step_probe.py default|settle")
cfg = dataclasses.replace(config_for("xl", 64), d_model=64, d_ff=128, n_heads=4)
model = TransformerLM(cfg)
opt = torch.optim.AdamW(model.parameters(), foreach=True)
x = torch.randint(0, cfg.vocab_size, (2, 64))
spent: list[float] = []
began = [0.0]


def timed(phase: str, info: dict) -> None:
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        spent[-1] += time.perf_counter() - began[0]


gc.callbacks.append(timed)


def step() -> None:
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).view(-1, cfg.vocab_size).float(), x.view(-1))
    loss.backward()
    opt.step()


for _ in range(3):
    spent.append(0.0)
    step()
if mode == "settle":
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
spent.clear()
walls = []
for _ in range(30):
    spent.append(0.0)
    t = time.perf_counter()
    step()
    walls.append(time.perf_counter() - t)
print(f"{mode}: {cfg.n_layers} blocks, step median {1e3 * statistics.median(walls):.1f} ms, collector a step mean "
      f"{1e3 * statistics.mean(spent):.2f} ms, max {1e3 * max(spent):.2f} ms; objects frozen {gc.get_freeze_count()}")

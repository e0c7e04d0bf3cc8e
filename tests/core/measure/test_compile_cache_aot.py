"""The compile cache's verdict counts AOTAutograd's cache too: a graph AOTAutograd cannot cache is traced again on
every start while inductor loads it, and `hit` alone would hide that (the fp8 rung's 57.6 s compile on a `hit`,
docs/results/gpu_loop_ladder_fp8_h200.md). Real torch.compile on the CPU, in a child process with its own cache
folder: a graph AOTAutograd caches, and one it bypasses (a function it does not know, called in the graph)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

PROGRAM = r"""
import json, sys
import torch
from perfconsole.core.measure import compile_cache

class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2

def opaque(x):  # a call AOTAutograd's cache cannot key: it bypasses the graph
    return Twice.apply(x)

torch._dynamo.allow_in_graph(opaque)
layer = torch.nn.Linear(16, 16)
programs = {"plain": lambda x: torch.nn.functional.gelu(layer(x)), "opaque": lambda x: opaque(layer(x)).relu()}
out = {}
for name, fn in programs.items():
    for attempt in ("first", "again"):
        torch._dynamo.reset()  # the next compile starts afresh, as a new process would, and meets the cache
        watch = compile_cache.Watch()
        torch.compile(fn)(torch.randn(8, 16)).sum().backward()
        out[f"{name} {attempt}"] = watch.verdict()
print(json.dumps(out))
"""


def test_the_verdict_says_when_aotautograd_traced_a_graph_the_fx_cache_then_served(tmp_path):
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    v = json.loads(done.stdout.strip().splitlines()[-1])
    # A graph both caches hold: compiled once, then loaded whole, and the verdict stays the plain word.
    assert v["plain first"] == "miss" and v["plain again"] == "hit"
    # The graph AOTAutograd bypasses: inductor's cache serves it the second time, AOTAutograd's never does.
    assert v["opaque first"].startswith("miss; AOTAutograd 0 hit, 0 miss, ") and v["opaque first"].endswith(" bypass")
    assert v["opaque again"].startswith("hit; AOTAutograd 0 hit, 0 miss, ") and not v["opaque again"].endswith(" 0 bypass")

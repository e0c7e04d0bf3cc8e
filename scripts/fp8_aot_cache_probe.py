"""Why a compiled rerun of the fp8 rung still traces: AOTAutograd's cache and torchao's float8 training graph.

Compiles a small bf16 model converted by torchao's `convert_to_float8_training` (the fp8 rung's conversion), forward
and backward, in a fresh child process per attempt, all attempts on one TORCHINDUCTOR_CACHE_DIR; prints inductor's FX
graph cache counts, AOTAutograd's cache counts and the reason AOTAutograd gave for bypassing its cache. Each attempt
after the first marks the call targets the previous one was refused for as cacheable
(torch._inductor.config.unsafe_marked_cacheable_functions, keyed by torchao's version), to find every reason, not
only the first; once no new target turns up, one more attempt with the same marks shows what the caches then serve. Runs on the CPU (torch's fp8 matmul runs there too). Needs torchao:

    python3 scripts/fp8_aot_cache_probe.py [--attempts 8]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

CHILD = r"""
import json, logging, sys
import torch
import torchao
from torch._dynamo.utils import counters
from torchao.float8 import convert_to_float8_training

reasons = []

class Keep(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "Bypassing autograd cache" in text:
            reasons.append(text.split("due to: ", 1)[-1].strip())

log = logging.getLogger("torch._functorch._aot_autograd.autograd_cache")
log.setLevel(logging.INFO)
log.addHandler(Keep())
torch._inductor.config.unsafe_marked_cacheable_functions = {n: f"torchao {torchao.__version__}" for n in sys.argv[1:]}
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128, bias=False), torch.nn.GELU(),
                            torch.nn.Linear(128, 64, bias=False)).to(torch.bfloat16)
convert_to_float8_training(model)
x = torch.randn(32, 64, dtype=torch.bfloat16)
torch.compile(model)(x).float().sum().backward()
print(json.dumps({"torch": torch.__version__, "torchao": torchao.__version__, "marked": sys.argv[1:],
                  "fxgraph": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")},
                  "aot_autograd": {k: v for k, v in counters["aot_autograd"].items() if "cache" in k},
                  "bypass_reasons": reasons}))
"""

TARGET = re.compile(r"Unsupported call_function target <(?:class|function) '?([^'> ]+)'?")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--attempts", type=int, default=8, help="child processes at most (8)")
    a = p.parse_args(argv)
    marked: list[str] = []
    again = False
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        for attempt in range(1, a.attempts + 1):
            done = subprocess.run([sys.executable, "-c", CHILD, *marked], env=env, capture_output=True, text=True,
                                  timeout=600)
            if done.returncode != 0:
                print(f"attempt {attempt}: exit {done.returncode}\n{done.stderr[-1500:]}", file=sys.stderr)
                return 1
            out = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps({"attempt": attempt, **out}), flush=True)
            found = [m.group(1) for r in out["bypass_reasons"] if (m := TARGET.search(r))]
            new = [t for t in found if t not in marked]
            if not new:  # no reason left, or one that marking a call target cannot answer; the last marks were
                if again:  # run twice: the second run shows what the caches then serve
                    return 0
                again = True
                continue
            marked += new
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Plain processes of the headline test's host-bound spec, the collector set (as committed) and left at Python's
defaults, taking turns; each a fresh launch as make_launch makes it, cold (no console or server was up)."""
import os, statistics, sys, time
from perfconsole.core.launch.replicates import make_launch
from perfconsole.core.record import RunRecord
from perfconsole.core.spec import RunSpec
SPEC = RunSpec(size="large", ctx=512, batch=4, precision="fp16", mode="train", device="cuda", warmup=3, steps=10)
out = {"settled": [], "default": []}
for _round in range(int(sys.argv[1])):
    for kind in ("settled", "default"):
        env = {"AB_GC_DEFAULT": "1"} if kind == "default" else {}
        for k in ("AB_GC_DEFAULT",):
            os.environ.pop(k, None)
        os.environ.update(env)
        rec = RunRecord(SPEC)
        t = time.monotonic()
        for e in make_launch(SPEC).events():
            rec.apply(e)
        ms = rec.summary.total_ms.median if rec.summary else None
        out[kind].append(ms)
        print(kind, rec.status, round(ms, 2) if ms else None, "steps", [round(s.total_ms, 1) for s in rec.steps], f"{time.monotonic()-t:.1f}s", flush=True)
for k, v in out.items():
    v = [x for x in v if x]
    print(k, "median", round(statistics.median(v), 2), "range", round(min(v), 2), round(max(v), 2), f"({(max(v)/min(v)-1)*100:.1f}% apart)")

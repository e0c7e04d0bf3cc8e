#!/usr/bin/env bash
# The time and memory cost of --checkpoint blocks on one GPU: SIZE (default 2.7B) bf16 train, ctx 512, batch 4,
# sdpa, processes alternating none / blocks (ROUNDS pairs), each `perfconsole run --json` into $OUT.
# Usage on the GPU machine: source scripts/device_env.sh && OUT=... bash scripts/checkpoint_cost.sh
set -uo pipefail
SIZE=${SIZE:-2.7B} ROUNDS=${ROUNDS:-2} OUT=${OUT:-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt"
for r in $(seq 1 "$ROUNDS"); do
  for c in none blocks; do
    python3 -m perfconsole.core.cli.main run --size "$SIZE" --ctx 512 --batch 4 --precision bf16 --mode train \
      --attention sdpa --warmup 3 --steps 10 --device cuda --checkpoint "$c" --json \
      > "$OUT/ckpt_${c}_$r.json" 2> "$OUT/ckpt_${c}_$r.log"
  done
done
python3 - "$OUT" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("ckpt_*.json")):
    d = json.loads(f.read_text())["data"]
    s = d["summary"] or {}
    rows.setdefault(d["spec"]["checkpoint"], []).append(
        (s.get("total_ms", {}).get("median"), s.get("peak_allocated_mib"), d["status"], [x.get("loss") for x in d["steps"]][-1]))
print("gpu:", (out / "gpu.txt").read_text().strip())
print("| checkpoint | status | median step (ms), per process | peak allocated (MiB) | last loss |")
for c, rs in rows.items():
    print(f"| {c} | {','.join(r[2] for r in rs)} | {', '.join(f'{r[0]:.2f}' for r in rs if r[0])} | "
          f"{', '.join(f'{r[1]:,.0f}' for r in rs if r[1])} | {rs[-1][3]} |")
n, b = rows.get("none", []), rows.get("blocks", [])
if n and b and all(r[0] for r in n + b):
    tn, tb = statistics.median(r[0] for r in n), statistics.median(r[0] for r in b)
    mn, mb = statistics.median(r[1] for r in n), statistics.median(r[1] for r in b)
    print(f"time x{tb / tn:.3f} ({tb - tn:+.2f} ms), peak memory x{mb / mn:.3f} ({mb - mn:+,.0f} MiB)")
PY

#!/usr/bin/env bash
# Which data-parallel settings bring 2.7B bf16 train (ctx 512, batch 4 per rank, sdpa) closest to the one-GPU
# step on two GPUs: one one-process run, saved, is every job's baseline (`run --baseline`), then one job per
# setting, then the independent script (scripts/independent_ddp.py) of FSDP with bf16 gathers, no reshard.
# Run from the repository root on a two-GPU machine: source scripts/device_env.sh && D=$OUT/dp bash THIS.
set -uo pipefail
D=${D:-"$PWD/out-dp-probe"}
mkdir -p "$D"
C=(--size 2.7B --ctx 512 --batch 4 --precision bf16 --mode train --attention sdpa --warmup 3 --steps 10 --device cuda)
pc() { timeout -k 10 150 python3 -m perfconsole.tui.main run "${C[@]}" --force "$@"; }
CUDA_VISIBLE_DEVICES=0 pc --save "$D/one.json" > "$D/one.txt" 2>&1; echo "one process exit $?"
while read -r name flags; do
    # shellcheck disable=SC2086  # flags are words
    pc --nproc 2 $flags --baseline "$D/one.json" --save "$D/$name.json" > "$D/$name.txt" 2>&1
    echo "$name exit $?"
done <<'LIST'
ddp --parallel ddp
ddp-bf16hook-view --parallel ddp --comm-hook bf16 --grad-as-bucket-view
fsdp --parallel fsdp
fsdp-bf16 --parallel fsdp --fsdp-bf16
fsdp-bf16-noreshard --parallel fsdp --fsdp-bf16 --no-reshard
LIST
for flags in "--fsdp --fsdp-bf16 --no-reshard" ""; do
    # shellcheck disable=SC2086
    timeout -k 10 120 torchrun --standalone --nproc-per-node 2 scripts/independent_ddp.py --size 2.7B --ctx 512 --batch 4 \
        --steps 10 $flags >> "$D/independent.jsonl" 2>> "$D/independent.log"
    echo "independent [$flags] exit $?"
done
python3 - "$D" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
print("| program | status | median step (ms) | weak scaling | comm (ms) | exposed comm (ms) | peak alloc (GiB) |")
print("| --- | --- | --: | --: | --: | --: | --: |")
for f in sorted(d.glob("*.json")):
    r = json.loads(f.read_text())["data"]
    s = r.get("summary") or {}
    med = (s.get("total_ms") or {}).get("median")
    fmt = lambda v, k=1.0, p=2: "-" if v is None else f"{v * k:,.{p}f}"
    comm = (s.get("comm_ms") or {}).get("median") if isinstance(s.get("comm_ms"), dict) else s.get("comm_ms")
    print(f"| {f.stem} | {r.get('status')} | {fmt(med)} | {fmt(s.get('scaling_efficiency'), 100, 1)}% | {fmt(comm)} | "
          f"{fmt(s.get('exposed_comm_ms'))} | {fmt(s.get('peak_allocated_mib'), 1 / 1024)} |")
for line in (d / "independent.jsonl").read_text().splitlines():
    if line.startswith("{"):
        j = json.loads(line)
        print(f"| independent fsdp={j.get('fsdp')} bf16={j.get('fsdp_bf16')} reshard={j.get('reshard')} | ok | "
              f"{j['median_step_ms']:,.2f} | | | | {max(j['peak_allocated_mib']) / 1024:,.2f} |")
PY

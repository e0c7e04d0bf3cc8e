#!/usr/bin/env bash
# Do FSDP2's step-to-step swings (152 to 374 ms in dp_priority_probe.sh) come from the caching allocator? The
# independent script, 2.7B bf16 train, ctx 512, batch 4 per rank, 5 warm-up + 20 steps, FSDP bf16 no reshard and
# DDP, with and without PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, interleaved. Two GPUs; from the repository
# root after `source scripts/device_env.sh`: D=$OUT/alloc bash THIS.
set -uo pipefail
D=${D:-"$PWD/out-alloc"}
mkdir -p "$D"
while read -r name flags; do
    for conf in "" expandable_segments:True; do
        # shellcheck disable=SC2086
        PYTORCH_CUDA_ALLOC_CONF=$conf timeout -k 10 150 torchrun --standalone --nproc-per-node 2 scripts/independent_ddp.py \
            --size 2.7B --ctx 512 --batch 4 --warmup 5 --steps 20 $flags > "$D/$name-${conf:-default}.jsonl" 2>> "$D/independent.log"
        echo "$name [${conf:-default}] exit $?"
    done
done <<'LIST'
fsdp-bf16-noreshard --fsdp --fsdp-bf16 --no-reshard
ddp
fsdp-bf16-noreshard-2 --fsdp --fsdp-bf16 --no-reshard
LIST
python3 - "$D" <<'PY'
import json, sys
from pathlib import Path
print("| run | allocator | median step (ms) | min (ms) | max (ms) | steps (ms) |")
print("| --- | --- | --: | --: | --: | --- |")
for f in sorted(Path(sys.argv[1]).glob("*.jsonl")):
    for line in f.read_text().splitlines():
        if line.startswith("{"):
            j = json.loads(line)
            name, _, conf = f.stem.rpartition("-") if f.stem.endswith("default") else f.stem.partition("-expandable")
            print(f"| {f.stem} | | {j['median_step_ms']:,.2f} | {min(j['job_step_ms']):,.2f} | {max(j['job_step_ms']):,.2f} | "
                  f"{' '.join(f'{v:.0f}' for v in j['job_step_ms'])} |")
PY

#!/usr/bin/env bash
# Does NCCL at high stream priority let the gradients' collectives overlap the backward? The independent script
# (scripts/independent_ddp.py), 2.7B bf16 train, ctx 512, batch 4 per rank, 5 warm-up + 20 steps, each setting
# with and without --nccl-high-priority, interleaved. Two GPUs; from the repository root after
# `source scripts/device_env.sh`: D=$OUT/prio bash THIS.
set -uo pipefail
D=${D:-"$PWD/out-prio"}
mkdir -p "$D"
while read -r name flags; do
    for prio in "" --nccl-high-priority; do
        # shellcheck disable=SC2086
        timeout -k 10 150 torchrun --standalone --nproc-per-node 2 scripts/independent_ddp.py --size 2.7B --ctx 512 \
            --batch 4 --warmup 5 --steps 20 $flags $prio >> "$D/independent.jsonl" 2>> "$D/independent.log"
        echo "$name [$prio] exit $?"
    done
done <<'LIST'
ddp
ddp-bf16hook --bf16-hook
fsdp-bf16-noreshard --fsdp --fsdp-bf16 --no-reshard
LIST
python3 - "$D" <<'PY'
import json, statistics, sys
from pathlib import Path
print("| fsdp | bf16 hook | fsdp bf16 | reshard | high priority | median step (ms) | min (ms) | max (ms) | peak (GiB) |")
print("| --- | --- | --- | --- | --- | --: | --: | --: | --: |")
for line in (Path(sys.argv[1]) / "independent.jsonl").read_text().splitlines():
    if line.startswith("{"):
        j = json.loads(line)
        print(f"| {j['fsdp']} | {j['bf16_hook']} | {j['fsdp_bf16']} | {j['reshard']} | {j['nccl_high_priority']} | "
              f"{j['median_step_ms']:,.2f} | {min(j['job_step_ms']):,.2f} | {max(j['job_step_ms']):,.2f} | "
              f"{max(j['peak_allocated_mib']) / 1024:,.1f} |")
PY

#!/usr/bin/env bash
# The data-parallel ladder on two GPUs and the checks beside it, in one device call: `perfconsole ladder --nproc 2`
# (2.7B bf16 train, ctx 512, batch 4 per rank; every rung, no profiler pass), its Markdown, the independent script
# (scripts/independent_ddp.py) of DDP's defaults and of FSDP bf16 without reshard, and a torch-profiler capture
# over both ranks of DDP's defaults (where the step's time goes: NCCL kernels against compute).
# From the repository root on a two-GPU machine: source scripts/device_env.sh && bash scripts/gpu_dp_ladder.sh
set -uo pipefail
D=${D:-"${OUT:-$PWD/out}/dp-ladder"}
mkdir -p "$D"
SIZE=${SIZE:-2.7B}
pc() { python3 -m perfconsole.tui.main "$@"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$D/gpus.txt"
git rev-parse --short HEAD 2>/dev/null | tee "$D/commit.txt"
T0=$(date +%s)
timeout -k 10 "${LADDER_CAP:-420}" python3 -m perfconsole.tui.main ladder --size "$SIZE" --nproc 2 --ctx 512 --batch 4 \
    --precision bf16 --warmup 3 --steps 10 --device cuda --no-profile --force --save "$D/ladder.json" \
    > "$D/ladder.txt" 2> "$D/ladder.err"
echo "ladder exit $? in $(( $(date +%s) - T0 )) s"
pc export "$D/ladder.json" --format md > "$D/ladder.md" 2>&1 && cat "$D/ladder.md"
for flags in "" "--fsdp --fsdp-bf16 --no-reshard"; do
    # shellcheck disable=SC2086
    timeout -k 10 120 torchrun --standalone --nproc-per-node 2 scripts/independent_ddp.py --size "$SIZE" --ctx 512 \
        --batch 4 --warmup 3 --steps 10 $flags >> "$D/independent.jsonl" 2>> "$D/independent.log"
    echo "independent [$flags] exit $?"
done
grep '^{' "$D/independent.jsonl" | python3 -c "
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    print(f\"independent fsdp={j['fsdp']} bf16={j['fsdp_bf16']} reshard={j['reshard']}: median {j['median_step_ms']:.2f} ms, \"
          f\"steps {' '.join(f'{v:.0f}' for v in j['job_step_ms'])}\")"
timeout -k 10 150 python3 -m perfconsole.tui.main run --size "$SIZE" --ctx 512 --batch 4 --precision bf16 --mode train \
    --attention sdpa --warmup 3 --steps 10 --device cuda --nproc 2 --parallel ddp --profile torch --force \
    --out-dir "$D/profiled" --save "$D/ddp_profiled.json" > "$D/ddp_profiled.txt" 2>&1
echo "profiled ddp exit $?"
tail -20 "$D/ddp_profiled.txt"
rm -rf "$D/profiled"  # the traces: too large to bring back; the record keeps their tables and overlap
echo "total $(( $(date +%s) - T0 )) s"

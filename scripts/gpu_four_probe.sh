#!/usr/bin/env bash
# Four GPUs, first look (issue: the data-parallel step within 3 % of plain torchrun): DDP's defaults under
# perfconsole and under the independent script, interleaved, and the candidate programs for >= 90 % weak
# scaling at 2.7B (compiled DDP with bf16 weights; compiled FSDP2 with bf16 gathers/reduce-scatters, blocks
# kept gathered), each beside its one-process program. 2.7B bf16 train, sdpa, ctx 512, batch 4 per rank.
# From the repository root on a four-GPU machine: source scripts/device_env.sh && bash scripts/gpu_four_probe.sh
set -uo pipefail
D=${D:-"${OUT:-$PWD/out}/four"}
mkdir -p "$D"
export PERFCONSOLE_DATA_DIR="$D/data"
SIZE=${SIZE:-2.7B}
T0=$(date +%s)
{ nvidia-smi; nvidia-smi topo -m; lscpu | grep -i 'numa\|^CPU(s)\|Model name';
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; git rev-parse --short HEAD; } > "$D/environment.txt" 2>&1
COMMON=(--size "$SIZE" --ctx 512 --batch 4 --warmup 3 --steps 10)
indep() {  # name nproc cap flags...
    local name=$1 n=$2 cap=$3; shift 3
    echo "torchrun --standalone --nproc-per-node $n scripts/independent_ddp.py ${COMMON[*]} $*" >> "$D/commands.txt"
    timeout -k 10 "$cap" torchrun --standalone --nproc-per-node "$n" scripts/independent_ddp.py "${COMMON[@]}" "$@" \
        > "$D/$name.json" 2> "$D/$name.log"
    echo "$name exit $? at $(( $(date +%s) - T0 )) s"
}
pc() {  # name cap args...
    local name=$1 cap=$2; shift 2
    echo "perfconsole run ${COMMON[*]} $*" >> "$D/commands.txt"
    timeout -s INT -k 20 "$cap" python3 -m perfconsole.tui.main run "${COMMON[@]}" --precision bf16 --mode train \
        --attention sdpa --device cuda --force --json --save "$D/$name.json" "$@" > /dev/null 2> "$D/$name.log"
    echo "$name exit $? at $(( $(date +%s) - T0 )) s"
}
indep ind_ddp4_a 4 90
pc pc_ddp4_a 150 --nproc 4 --parallel ddp
indep ind_ddp4_b 4 90
PERFCONSOLE_TELEMETRY=0 pc pc_ddp4_notel 150 --nproc 4 --parallel ddp
indep ind_plain1_bf16w_c 1 150 --no-wrap --compile --bf16-weights
indep ind_ddp4_bf16w_view_c 4 170 --compile --bf16-weights --grad-as-bucket-view
indep ind_plain1_c 1 150 --no-wrap --compile
indep ind_fsdp4_bf16_nr_c 4 170 --compile --fsdp --fsdp-bf16 --no-reshard
echo "total $(( $(date +%s) - T0 )) s"
python3 scripts/four_gpu_table.py "$D"

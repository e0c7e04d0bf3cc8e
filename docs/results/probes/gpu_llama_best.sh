#!/usr/bin/env bash
# The Llama-3.2-1B shape's fastest programs against the 55 % MFU target (counted FLOPs, bf16 dense peak):
# the ladder's top rungs with the torch profiler (what each costs, by kernel category), a `run` of
# torch.compile + fused AdamW + bf16 weights + fp8 without liger or CUDA graphs, and the independent
# script's timing of that same program written out by hand. One device call of at most 560 s; every command
# has its own cap and writes its stdout/stderr under $OUT.
# Run from the repository root on the GPU machine after `source scripts/device_env.sh`.
set -uo pipefail
OUT=${OUT:-"$PWD/out-llama-best"}
mkdir -p "$OUT"
export PERFCONSOLE_DATA_DIR="$OUT/data" HF_HUB_OFFLINE=1
PC=(python3 -m perfconsole.tui.main)
B=(--model hf:llama --size 1B --ctx 2048 --batch 4 --precision bf16 --device cuda)
L=("${B[@]}" --mode train --attention sdpa)  # the ladder always trains, and its first rungs set the attention
T0=$(date +%s)
step() {  # name cap command...: run it capped, log it, say its exit code and when
    local name=$1 cap=$2; shift 2
    echo "== $name at $(( $(date +%s) - T0 )) s: $*" >> "$OUT/timeline.log"
    timeout -s INT -k 10 "$cap" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.log"
    echo "$name exit $? at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/timeline.log"
}
{ nvidia-smi -L; python3 -c "import torch, transformers, torchao; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'torchao', torchao.__version__)"; } > "$OUT/environment.txt" 2>&1

step ladder_top "${CAP_LADDER:-300}" "${PC[@]}" ladder "${B[@]}" --warmup 3 --steps 20 \
    --rungs bf16-weights,liger,fp8 --force --save "$OUT/ladder_top.json"
step run_fp8 "${CAP_RUN:-150}" "${PC[@]}" run "${L[@]}" --warmup 3 --steps 20 --compile --optimizer fused \
    --weights bf16 --fp8 --force --save "$OUT/run_fp8.json"
step independent_fp8 "${CAP_INDEP:-130}" python3 docs/results/probes/independent_model_timing.py --model hf:llama --size 1B \
    --ctx 2048 --batch 4 --warmup 3 --steps 20 --compile --bf16-weights --fp8 --against "$OUT/run_fp8.json"
for f in "$OUT"/*.json; do "${PC[@]}" export "$f" --format md --force -o "${f%.json}.md" 2>/dev/null; done
cat "$OUT/timeline.log"

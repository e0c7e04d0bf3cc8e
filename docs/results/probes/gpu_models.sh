#!/usr/bin/env bash
# Own models on a GPU: hf:llama 1B (Llama 3.2 shape, GQA, 128,256-token vocabulary) bf16 train ctx 2048
# batch 4 through run, an nsys capture, the ladder (one capped process per rung) and an independent CUDA-event
# timing of the same model; then the worked factory example and a gpt2 size through run and compare.
# Run from the repository root on the GPU machine after `source scripts/device_env.sh` (the transformers wheels
# travel in .device/: ../shared/device/prepare.sh with the names in docs/models.md). Everything goes to $OUT.
# Budget: one device call of at most 540 s; every command has its own cap (CAP_* to change them) and a
# section that would not fit in what is left of BUDGET is skipped and says so.
set -uo pipefail
OUT=${OUT:-"$PWD/out-models"}
mkdir -p "$OUT"
export PERFCONSOLE_DATA_DIR="$OUT/data" HF_HUB_OFFLINE=1
PC=(python3 -m perfconsole.tui.main)
BUDGET=${BUDGET:-530}
T0=$(date +%s)
LLAMA=(--model hf:llama --size 1B --ctx 2048 --batch 4 --precision bf16 --mode train --attention sdpa --device cuda)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
step() {  # name cap command...: run it capped, log it, say its exit code and when
    local name=$1 cap=$2; shift 2
    if (( $(left) < cap )); then echo "$name skipped: $(left) s left, cap $cap s" | tee -a "$OUT/timeline.log"; return; fi
    echo "== $name at $(( $(date +%s) - T0 )) s: $*" >> "$OUT/timeline.log"
    timeout -s INT -k 10 "$cap" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.log"
    echo "$name exit $? at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/timeline.log"
}
{ nvidia-smi -L; python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} > "$OUT/environment.txt" 2>&1

step run_llama "${CAP_RUN:-110}" "${PC[@]}" run "${LLAMA[@]}" --warmup 5 --steps 20 --force --save "$OUT/llama1B.json"
step independent "${CAP_INDEP:-70}" python3 docs/results/probes/independent_model_timing.py --model hf:llama --size 1B --ctx 2048 \
    --batch 4 --warmup 5 --steps 20 --against "$OUT/llama1B.json"
step nsys_llama "${CAP_NSYS:-90}" "${PC[@]}" run "${LLAMA[@]}" --warmup 3 --steps 5 --profile nsys \
    --force --save "$OUT/llama1B_nsys.json" --out-dir "$OUT/nsys"
# Every kernel in a phase: the kernel time the NVTX phases hold against all kernel time of the capture.
[[ -f "$OUT/llama1B_nsys.json" ]] && python3 - "$OUT/llama1B_nsys.json" > "$OUT/nsys_phases.txt" 2>&1 <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["data"]["profile"]["tables"]
total = sum(r.get("total_time_ns") or 0 for r in p.get("cuda_gpu_kern_sum", []))
rows = p.get("nvtx_kern_sum", [])
name = lambda r: str(r.get("range") or r.get("name") or "").lstrip(":")
phases = sum(r.get("total_time_ns") or 0 for r in rows if name(r) in ("forward", "backward", "optimizer_step"))
print(json.dumps({"kernel_ns": total, "in_phases_ns": phases, "share": phases / total if total else None,
                  "layer_ranges": sorted({name(r) for r in rows if "layers." in name(r)})[:8]}))
PY
for r in ${RUNGS:-sdpa compile fp8}; do  # one ladder process per rung, each with its own cap
    cap=${CAP_RUNG:-45}; [[ $r != sdpa ]] && cap=${CAP_COMPILED_RUNG:-100}
    step "ladder_$r" "$cap" "${PC[@]}" ladder --model hf:llama --size 1B --ctx 2048 --batch 4 --precision bf16 \
        --warmup 2 --steps 5 --rungs "$r" --no-profile --device cuda --force --save "$OUT/ladder_$r.json"
done
step run_factory "${CAP_FACTORY:-40}" "${PC[@]}" run --model docs/examples/student_model.py:build --model-arg d_model=768 \
    --model-arg n_layers=12 --model-arg n_heads=12 --ctx 1024 --batch 8 --precision bf16 --mode train --device cuda \
    --force --save "$OUT/factory.json"
step compare_gpt2 "${CAP_COMPARE:-60}" "${PC[@]}" compare --model hf:gpt2 --size 124M --vary size=124M,355M --ctx 1024 \
    --batch 8 --precision bf16 --mode train --attention sdpa --device cuda --warmup 3 --steps 10 --force --save "$OUT/compare_gpt2.json"
for f in "$OUT"/*.json; do "${PC[@]}" export "$f" --format md --force -o "${f%.json}.md" 2>/dev/null; done
tail -n 3 "$OUT"/*.txt > "$OUT/summary.txt" 2>&1
cat "$OUT/timeline.log"

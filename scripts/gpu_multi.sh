#!/usr/bin/env bash
# Data parallel on a node: DDP (defaults, and each setting the console offers) and FSDP against one
# process, and a sweep spread over the GPUs against the same sweep on one GPU.
# Run from the repository root on a machine with two or more GPUs (source scripts/device_env.sh first);
# PACK=1 packs $OUT into $OUT/all.tgz at the end.
# Snapshots and logs go to $OUT; the evidence to docs/results/multi_gpu_<size>_<n>x<gpu>.md/.json, written
# when dp or sweep ran, from the snapshots in $OUT. About 9 min on two H200s in all; to stay inside a
# 10-minute call, run SECTIONS="dp sweep" and SECTIONS=tests apart; SECTIONS=target (compiled DDP, and FSDP's
# best) and SECTIONS=fsdp (FSDP's settings one at a time) take a call each. SIZE=xl for a smaller model.
set -uo pipefail
OUT=${OUT:-"$PWD/out-multi"}
RES=docs/results
mkdir -p "$OUT" "$RES"
export PERFCONSOLE_DATA_DIR="$OUT/data"
PC=(python3 -m perfconsole.tui.main)
NGPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z')
DEV="${NGPU}x$DEV"
SIZE=${SIZE:-2.7B}
N=${N:-2}
T0=$(date +%s)
SECTIONS=${SECTIONS:-"tests dp sweep"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
section() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/timeline.log"; }
CMDS="$OUT/commands.txt"; : > "$CMDS"
# ONLY="name ..." runs just those measurements of the sections chosen (a device call has 10 minutes).
picked() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
measure() {  # name cap args...: one run, its output and log kept, its command noted
    local name=$1 cap=$2; shift 2
    picked "$name" || return 0
    echo "perfconsole $*" >> "$CMDS"
    timeout -s INT -k 30 "$cap" "${PC[@]}" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.log"
    echo "$name exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/timeline.log"
}
{ nvidia-smi; nvidia-smi topo -m; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())"; } \
    > "$OUT/environment.txt" 2>&1

if want tests; then
    section tests
    timeout 300 python3 -m pytest -q -m gpu tests/core/launch/test_data_parallel_gpu.py > "$OUT/tests.txt" 2>&1
    echo "tests exit $?" | tee -a "$OUT/timeline.log"; tail -3 "$OUT/tests.txt"
fi

J=(run --size "$SIZE" --ctx 512 --batch 4 --precision bf16 --mode train --attention sdpa --warmup 3 --steps 10
   --device cuda --nproc "$N")
IND=(torchrun --standalone --nproc-per-node "$N" scripts/independent_ddp.py --size "$SIZE" --ctx 512 --batch 4 --steps 10)
independent() {  # name cap args...: the independent DDP script with the same settings as a variant
    local name=$1 cap=$2; shift 2
    picked "$name" || return 0
    echo "${IND[*]} $*" >> "$CMDS"
    timeout -k 20 "$cap" "${IND[@]}" "$@" > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
    echo "$name exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/timeline.log"
}
if want dp; then
    section "data parallel, $SIZE bf16 train, $N GPUs"
    # Each variant that changes what one process runs (--weights) carries its own one-process baseline (--scaling).
    measure ddp_default 150 "${J[@]}" --parallel ddp --scaling --force --save "$OUT/ddp_default.json"
    independent ind_default 90
    measure ddp_all 120 "${J[@]}" --parallel ddp --bucket-mb 100 --grad-as-bucket-view --comm-hook bf16 \
        --force --save "$OUT/ddp_all.json"
    independent ind_all 90 --bucket-mb 100 --grad-as-bucket-view --bf16-hook
    measure ddp_bf16w 150 "${J[@]}" --parallel ddp --weights bf16 --scaling --force --save "$OUT/ddp_bf16w.json"
    independent ind_bf16w 90 --bf16-weights
    measure ddp_bf16w_view 120 "${J[@]}" --parallel ddp --weights bf16 --grad-as-bucket-view --bucket-mb 100 \
        --scaling --force --save "$OUT/ddp_bf16w_view.json"
    measure ddp_profiled 150 "${J[@]}" --parallel ddp --profile torch --force --save "$OUT/ddp_profiled.json"
    measure fsdp 150 "${J[@]}" --parallel fsdp --force --save "$OUT/fsdp.json"
fi
if want dp2; then  # what did not fit in the first call
    section "data parallel, more settings"
    measure ddp_bucket100 120 "${J[@]}" --parallel ddp --bucket-mb 100 --force --save "$OUT/ddp_bucket100.json"
    measure ddp_view 120 "${J[@]}" --parallel ddp --grad-as-bucket-view --force --save "$OUT/ddp_view.json"
    measure ddp_bf16 120 "${J[@]}" --parallel ddp --comm-hook bf16 --force --save "$OUT/ddp_bf16.json"
    measure fsdp_profiled 180 "${J[@]}" --parallel fsdp --profile torch --force --save "$OUT/fsdp_profiled.json"
    measure ddp_compile_all 240 "${J[@]}" --parallel ddp --compile --bucket-mb 100 --grad-as-bucket-view \
        --comm-hook bf16 --force --save "$OUT/ddp_compile_all.json"
fi
if want target; then  # the 90 % weak-scaling target: fewer host launches (compile, DDPOptimizer at DDP's buckets)
    section "data parallel, compiled"
    measure ddp_compile 240 "${J[@]}" --parallel ddp --compile --scaling --force --save "$OUT/ddp_compile.json"
    # Compiled whole (no DDPOptimizer): on one rank faster than DDPOptimizer in every pair measured, 1.15x
    # the compiled one-process step on a fast host (docs/results/wrap_one_gpu_h200.md); two GPUs say what
    # each costs with a link.
    measure ddp_compile_whole 240 "${J[@]}" --parallel ddp --compile --optimize-ddp no_optimization \
        --force --save "$OUT/ddp_compile_whole.json"
    # FSDP's fastest step on one rank, compiled (docs/results/wrap_one_gpu_h200.md); bf16 halves its bytes.
    measure fsdp_bf16_compile 240 "${J[@]}" --parallel fsdp --fsdp-bf16 --no-reshard --compile \
        --force --save "$OUT/fsdp_bf16_compile.json"
fi
if want fsdp; then  # FSDP's settings one at a time: fewer host launches (compile), fewer gathers, half the bytes
    section "fsdp settings"
    measure fsdp_compile 240 "${J[@]}" --parallel fsdp --compile --force --save "$OUT/fsdp_compile.json"
    measure fsdp_noreshard 150 "${J[@]}" --parallel fsdp --no-reshard --force --save "$OUT/fsdp_noreshard.json"
    measure fsdp_bf16 150 "${J[@]}" --parallel fsdp --fsdp-bf16 --force --save "$OUT/fsdp_bf16.json"
fi

SW=(sweep --sizes small,medium --ctx 256,512 --precision bf16 --mode train --attention sdpa --warmup 2 --steps 5
    --device cuda)
if want sweep; then
    section "sweep: cells on $NGPU GPUs at once, then on GPU 0 alone"
    s=$(date +%s.%N); measure sweep_gpus 200 "${SW[@]}" --force --save "$OUT/sweep_gpus.json"
    python3 -c "import time; print(round(time.time() - $s, 1))" > "$OUT/sweep_gpus.wall"
    s=$(date +%s.%N); measure sweep_serial 300 "${SW[@]}" --gpus 0 --force --save "$OUT/sweep_serial.json"
    python3 -c "import time; print(round(time.time() - $s, 1))" > "$OUT/sweep_serial.wall"
fi
want dp || want dp2 || want target || want fsdp || want sweep || exit 0
W1=$(cat "$OUT/sweep_gpus.wall" 2>/dev/null); W2=$(cat "$OUT/sweep_serial.wall" 2>/dev/null)

section evidence
python3 scripts/multi_gpu_evidence.py "$RES/multi_gpu_${SIZE}_$DEV" "$DEV" "SECTIONS=\"$SECTIONS\" bash scripts/gpu_multi.sh" \
    --commands "$CMDS" \
    --runs "ddp default=$OUT/ddp_default.json" "ddp bucket 100 MB + bucket view + bf16 hook=$OUT/ddp_all.json" \
           "ddp bf16 weights=$OUT/ddp_bf16w.json" "ddp bf16 weights + bucket view + bucket 100 MB=$OUT/ddp_bf16w_view.json" \
           "ddp default, torch profile=$OUT/ddp_profiled.json" "fsdp=$OUT/fsdp.json" \
           "ddp bucket 100 MB=$OUT/ddp_bucket100.json" "ddp grad as bucket view=$OUT/ddp_view.json" \
           "ddp bf16 hook=$OUT/ddp_bf16.json" "fsdp, torch profile=$OUT/fsdp_profiled.json" \
           "ddp compiled=$OUT/ddp_compile.json" "ddp compiled + bucket 100 MB + bucket view + bf16 hook=$OUT/ddp_compile_all.json" \
           "fsdp compiled=$OUT/fsdp_compile.json" "fsdp, blocks kept gathered=$OUT/fsdp_noreshard.json" \
           "ddp compiled whole=$OUT/ddp_compile_whole.json" "fsdp bf16=$OUT/fsdp_bf16.json" "fsdp bf16, blocks kept gathered, compiled=$OUT/fsdp_bf16_compile.json" \
    --independent "ddp default=$OUT/ind_default.jsonl" \
                  "ddp bucket 100 MB + bucket view + bf16 hook=$OUT/ind_all.jsonl" "ddp bf16 weights=$OUT/ind_bf16w.jsonl" \
    --sweep "all GPUs=$OUT/sweep_gpus.json:${W1:-}" "GPU 0 only=$OUT/sweep_serial.json:${W2:-}" \
    > "$OUT/evidence.txt" 2>&1
echo "evidence exit $?" | tee -a "$OUT/timeline.log"
cp "$RES/multi_gpu_${SIZE}_$DEV".* "$OUT/" 2>/dev/null
section done
# The short table, last.
sed -n '/^| variant/,/^$/p;/^| settings/,/^$/p' "$RES/multi_gpu_${SIZE}_$DEV.md" 2>/dev/null
grep -h "^Sweep" "$RES/multi_gpu_${SIZE}_$DEV.md" 2>/dev/null
# One archive back from the device machine (a call returns a handful of files, not dozens, each under
# 16 MiB): profiler traces stay behind, their figures are in the snapshots.
if [ -n "${PACK:-}" ]; then
    tar czf "/tmp/multi_gpu_out.tgz" --exclude='*trace.json' --exclude='*.nsys-rep' --exclude='*.sqlite' -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/multi_gpu_out.tgz "$OUT/all.tgz"
fi

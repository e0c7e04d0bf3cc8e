#!/usr/bin/env bash
# Issue 5 on one GPU: a memory run of xl at ctx 512, a 5-size x ctx 128..1024 train sweep in fp32
# and bf16, the attention grid with its OOM cells, eager vs compiled vs SDPA, a check that starting
# cells ahead changes no figure, and the gpu-marked tests of issue 5. Snapshots and Markdown
# exports go to docs/results/, full logs to $OUT (results.tgz holds docs/results/ at the end).
#
# Run from the repository root with perfconsole importable (PYTHONPATH=...); the `perfconsole`
# command need not be on PATH. Every section runs under `timeout -s INT`: Ctrl-C semantics, so a
# section that overruns keeps its finished cells and still exports (unfinished cells say "not run").
#
# SECTIONS picks what runs, in this order (default: memory sweep attention):
#   memory:     xl, ctx 512, batch 4, train, fp32, 2 warm-up + 3 measured steps
#   sweep:      small..2.7B x ctx 128,256,512,1024 x fp32,bf16, train, batch 4, 2 warm-up + 3 steps (40 cells)
#   attention:  d 16,32,64,128 x seq 256,1024,4096,8192,16384 and 32768, batch 8, naive and sdpa, fp32,
#               3 warm-up passes, 10 timed forward + 10 timed backward (48 cells). 32768 is added because
#               the card holds naive attention at 16384; at 32768 it does not.
#   startahead: d 64 x seq 256,1024,4096,16384, naive and sdpa, once with --start-ahead 1 and once with
#               the default: the same figures, and the wall time each took
#   compile:    eager vs torch.compile vs SDPA on d 64,128 x seq 1024,4096,16384
#   sweepagain: the sweep above once more with the default --start-ahead, against the committed
#               sweep_train_fp32_bf16.json (run one process at a time): its wall time, same figures
#   tests:      the gpu-marked tests of tests/core/grids/test_attention.py and test_memory_profile.py
# Caps (seconds) per section: MEMORY_CAP, SWEEP_CAP, ATTENTION_CAP, COMPILE_CAP.
set -uo pipefail

OUT=${OUT:-"$PWD/out-issue5"}
RES=docs/results
mkdir -p "$OUT" "$RES"
export PERFCONSOLE_DATA_DIR="$OUT/data"
PC=(python3 -m perfconsole.tui.main)
T0=$(date +%s)

section() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/timeline.log"; }
export_md() {  # snapshot, markdown name; the command goes under the report's title
    if [[ -f "$1" ]]; then
        "${PC[@]}" export "$1" --format md --force -o "$RES/$2" 2>>"$OUT/export.log" || echo "export of $1 failed" | tee -a "$OUT/timeline.log"
        python3 scripts/note_command.py "$RES/$2" "$LAST_COMMAND" "SECTIONS=$SECTION bash docs/results/probes/gpu_issue5.sh"
    else
        echo "no snapshot $1 (see the logs in $OUT)" | tee -a "$OUT/timeline.log"
    fi
}
measure() {  # SECTION cap out-name perfconsole-args...: runs it with Ctrl-C semantics at the cap
    SECTION=$1; local cap=$2 name=$3; shift 3
    LAST_COMMAND="perfconsole $*"
    timeout -s INT -k 20 "$cap" "${PC[@]}" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.log"
    echo "$name exit $?" >> "$OUT/timeline.log"
}

{ nvidia-smi || true; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; } \
    > "$OUT/environment.txt" 2>&1

SECTIONS=${SECTIONS:-"memory sweep attention"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

if want memory; then
section "memory: xl ctx 512 train fp32"
measure memory ${MEMORY_CAP:-60} memory run --size xl --ctx 512 --batch 4 --mode train --precision fp32 \
    --warmup 2 --steps 3 --device cuda --memory --force --save "$RES/memory_xl_ctx512.json" --out-dir "$OUT/memory"
export_md "$RES/memory_xl_ctx512.json" memory_xl_ctx512.md
fi

if want sweep; then
section "sweep: 5 sizes x ctx 128..1024 x fp32,bf16 train"
measure sweep ${SWEEP_CAP:-290} sweep sweep --sizes small,medium,large,xl,2.7B --ctx 128,256,512,1024 \
    --precision fp32,bf16 --mode train --batch 4 --warmup 2 --steps 3 --device cuda \
    --force --save "$RES/sweep_train_fp32_bf16.json" --out-dir "$OUT/sweep"
export_md "$RES/sweep_train_fp32_bf16.json" sweep_train_fp32_bf16.md
fi

if want attention; then
section "attention: d x seq grid, naive and sdpa"
measure attention ${ATTENTION_CAP:-170} attention attention --d 16,32,64,128 --seq 256,1024,4096,8192,16384,32768 \
    --batch 8 --impl naive,sdpa --precision fp32 --warmup 3 --iters 10 --device cuda --force --save "$RES/attention_grid.json"
export_md "$RES/attention_grid.json" attention_grid.md
fi

if want startahead; then
    section "attention: --start-ahead 1 against the default"
    for n in 1 default; do
        arg=(); [[ $n != default ]] && arg=(--start-ahead "$n")
        t0=$EPOCHREALTIME
        timeout -s INT -k 20 150 "${PC[@]}" attention --d 64 --seq 256,1024,4096,16384 --batch 8 --impl naive,sdpa \
            --precision fp32 --warmup 3 --iters 10 --device cuda "${arg[@]}" \
            --force --save "$OUT/start_ahead_$n.json" > "$OUT/start_ahead_$n.txt" 2> "$OUT/start_ahead_$n.log"
        echo "start-ahead $n exit $? wall $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s" | tee -a "$OUT/timeline.log"
    done
    python3 docs/results/probes/compare_grids.py "$OUT/start_ahead_1.json" "$OUT/start_ahead_default.json" \
        --timeline "$OUT/timeline.log" > "$RES/attention_start_ahead.md" 2>> "$OUT/export.log"
fi

if want compile; then
    section "attention: eager vs compiled vs sdpa"
    measure compile ${COMPILE_CAP:-240} attention_compile attention --d 64,128 --seq 1024,4096,16384 --batch 8 \
        --impl naive,sdpa --compile --precision fp32 --warmup 3 --iters 10 --device cuda --force --save "$RES/attention_compile.json"
    export_md "$RES/attention_compile.json" attention_compile.md
fi

if want sweepagain; then
    section "sweep again with the default --start-ahead"
    t0=$EPOCHREALTIME
    timeout -s INT -k 20 ${SWEEP_CAP:-290} "${PC[@]}" sweep --sizes small,medium,large,xl,2.7B --ctx 128,256,512,1024 \
        --precision fp32,bf16 --mode train --batch 4 --warmup 2 --steps 3 --device cuda \
        --force --save "$OUT/sweep_start_ahead.json" --out-dir "$OUT/sweep_again" > "$OUT/sweep_again.txt" 2> "$OUT/sweep_again.log"
    echo "sweep again exit $? wall $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s" | tee -a "$OUT/timeline.log"
    python3 docs/results/probes/compare_grids.py "$RES/sweep_train_fp32_bf16.json" "$OUT/sweep_start_ahead.json" \
        --timeline "$OUT/timeline.log" > "$RES/sweep_start_ahead.md" 2>> "$OUT/export.log"
fi

if want tests; then
    section "gpu tests"
    timeout -k 10 ${TESTS_CAP:-150} python3 -m pytest -q -m gpu tests/core/measure/test_memory_profile.py tests/core/grids/test_attention.py \
        > "$OUT/gpu_tests.log" 2>&1
    echo "gpu tests exit $?" >> "$OUT/timeline.log"
    tail -5 "$OUT/gpu_tests.log"
fi

section "done"
tar czf "$OUT/results.tgz" -C "$RES" .
ls -la "$RES" | tee -a "$OUT/timeline.log"

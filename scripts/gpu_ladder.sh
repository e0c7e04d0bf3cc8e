#!/usr/bin/env bash
# The optimization ladder and speed of light on a GPU. Run from the repository root on the GPU machine
# after `source scripts/device_env.sh` (torchao and liger-kernel come from the carried wheels; without
# them the liger and fp8 rungs say "unsupported: install perfconsole[fast]"). Snapshots and logs go to
# $OUT; the reports to docs/results/ (ladder_<size>_<device>.md/.json, peaks_<device>.json), each with
# the command that made it and the device. Budget: under 9 minutes on an H200 (2.7B compiles for about a
# minute per compiling rung); each command has its own timeout, and a ladder stopped by its timeout
# keeps (and reports) the rungs it finished.
#
# SECTIONS picks what runs, in this order (default: 2.7B tests small):
#   2.7B:  the ladder for 2.7B, bf16 train ctx 512 batch 4, with each rung's profiler pass, REPEAT_27 (1) processes;
#          with RESUME_27B=FILE (a ladder snapshot a capped call saved) it goes on with that ladder's unfinished
#          rungs (RESUME_small likewise)
#   tests: the gpu tests of peaks, CUDA graphs, bf16 weights and liger (numerics against the plain step)
#   small: the ladder for small, bf16 train ctx 512 batch 4, no profiler pass, REPEAT_SMALL (2) processes a rung
set -uo pipefail
# The device brings back at most 8 files: the work goes to $WORK, and $OUT gets the timeline and one tarball.
FINAL=${OUT:-"$PWD/out-ladder"}
OUT=${WORK:-/tmp/ladder-work}
RES=docs/results
mkdir -p "$OUT" "$RES" "$FINAL"
export PERFCONSOLE_DATA_DIR="$OUT/data"
PC=(python3 -m perfconsole.tui.main)
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z')
T0=$(date +%s)
section() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/timeline.log"; }
{ nvidia-smi; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  python3 -c "import torchao; print('torchao', torchao.__version__)"
  python3 -c "import liger_kernel, importlib.metadata as m; print('liger-kernel', m.version('liger-kernel'))"
} > "$OUT/environment.txt" 2>&1
SECTIONS=${SECTIONS:-"2.7B tests small"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

ladder() {  # size cap repeat steps extra...: one ladder, saved after every rung, exported even when stopped
    local size=$1 cap=$2 rep=$3 steps=$4; shift 4
    local args=(ladder --size "$size" --ctx 512 --batch 4 --precision bf16 --warmup 3 --steps "$steps" --repeat "$rep"
                --device cuda "$@")
    local var="RESUME_${size//[^a-zA-Z0-9]/}"   # RESUME_small, RESUME_27B
    local resume=${!var:-}
    local run=("${args[@]}")
    local how_cmd="perfconsole ${args[*]}"
    local how="SECTIONS=$size bash scripts/gpu_ladder.sh"
    if [[ -n $resume ]]; then  # a ladder a capped call saved: go on with its unfinished rungs
        cp "$resume" "$OUT/ladder_$size.json"
        run=(ladder --resume "$OUT/ladder_$size.json")
        how_cmd="perfconsole ${args[*]}, stopped by a call's time cap, then perfconsole ladder --resume FILE"
        how="SECTIONS=$size bash scripts/gpu_ladder.sh, then SECTIONS=$size $var=FILE bash scripts/gpu_ladder.sh"
    fi
    section "ladder $size (repeat $rep)${resume:+, resumed}"
    timeout -s INT -k 30 "$cap" "${PC[@]}" "${run[@]}" --force --save "$OUT/ladder_$size.json" --out-dir "$OUT/ladder_$size" \
        >> "$OUT/ladder_$size.txt" 2>> "$OUT/ladder_$size.log"
    echo "ladder $size exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/timeline.log"
    [[ -f "$OUT/ladder_$size.json" ]] || return
    "${PC[@]}" export "$OUT/ladder_$size.json" --format md --force -o "$RES/ladder_${size}_$DEV.md" \
        && python3 scripts/note_command.py "$RES/ladder_${size}_$DEV.md" "$how_cmd" "$how"
    "${PC[@]}" export "$OUT/ladder_$size.json" --format json --force -o "$RES/ladder_${size}_$DEV.json"
    python3 - "$RES/ladder_${size}_$DEV.json" "$how_cmd (run by \`$how\`)" <<'PY'
import json, sys
path, command = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
doc["command"] = command
json.dump(doc, open(path, "w"), indent=2)
PY
}

# small: 2 processes a rung, no profiler pass (2 minutes); 2.7B: one process a rung with its profiler pass,
# 8 steps (the eager rungs' profiles are the slow part; the compiling rungs compile for about a minute each).
SMALL_FLAGS=(--no-profile); [[ -n ${SMALL_PROFILE:-} ]] && SMALL_FLAGS=()   # SMALL_PROFILE=1: with the profiler pass
want 2.7B && ladder 2.7B "${CAP_27:-330}" "${REPEAT_27:-1}" 8
if want tests; then
    section tests
    timeout "${CAP_TESTS:-120}" python3 -m pytest -q -m gpu tests/core/measure/test_peaks_fast_paths.py ${TESTS_K:+-k "$TESTS_K"} \
        > "$OUT/tests.txt" 2>&1
    echo "tests exit $?" | tee -a "$OUT/timeline.log"; tail -3 "$OUT/tests.txt"
fi
want small && ladder small "${CAP_SMALL:-150}" "${REPEAT_SMALL:-2}" 10 "${SMALL_FLAGS[@]}"

section done
[[ -f "$PERFCONSOLE_DATA_DIR/peaks.json" ]] && cp "$PERFCONSOLE_DATA_DIR/peaks.json" "$RES/peaks_$DEV.json"
for f in "$RES"/ladder_*_"$DEV".md; do
    [[ -f $f ]] && { echo "--- $f"; grep -E '^(\| [0-9]|- peaks|Best)' "$f" | cut -d'|' -f2,4,5,7,10-12; }
done
tar czf "$FINAL/ladder.tgz" "$RES"/ladder_* "$RES"/peaks_* $(ls "$OUT"/*.json "$OUT"/*.txt "$OUT"/*.log 2>/dev/null) 2>/dev/null
cp "$OUT/timeline.log" "$FINAL/" 2>/dev/null
ls -la "$FINAL/ladder.tgz"

#!/usr/bin/env bash
# Llama-3.2-1B's shape (hf:llama 1B), bf16 train, ctx 2048, batch 4, on the GPU machine: why its kernels take
# their time (`--profile ncu`, then `perfconsole kernels --why`), and the settings that act on it, each timed by
# `perfconsole run` and the best one by the independent script (docs/results/probes/independent_model_timing.py).
# Two lanes side by side where there are two GPUs (lane 0: the ncu run; lane 1: the settings), one after the
# other on one. Each lane has its own data folder; every step has a time limit, so a call ends with what it has.
#   source scripts/device_env.sh && D=$OUT/llama bash scripts/gpu_llama_why.sh
# VARIANTS (words joined by '+', one variant a word) overrides the settings lane 1 times, INDEPENDENT the
# independent script's flags for the first of them, NCU_EXTRA flags the ncu run adds; NCU=0 skips lane 0.
# Everything but the data folders and the .ncu-rep is packed into $D.tgz (a call brings back a few files only).
set -uo pipefail
D=${D:-$PWD/out-llama}
mkdir -p "$D"
BASE=(--model hf:llama --size 1B --ctx 2048 --batch 4 --precision bf16 --mode train --attention sdpa --compile
      --optimizer fused --weights bf16 --kernels liger)
VARIANTS=${VARIANTS:-"--compile-mode+reduce-overhead --compile-mode+max-autotune none"}
LIMIT=${LIMIT:-300}
PC=(python3 -m perfconsole.core.cli.main)  # an array: `timeout` runs programs, not shell functions
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c .)
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv
  python3 -c "import torch, transformers, liger_kernel; print('torch', torch.__version__, 'transformers', \
transformers.__version__, 'liger', getattr(liger_kernel, '__version__', '?'))"; } > "$D/environment.txt" 2>&1

lane0() {  # the best setting without fp8 so far, under ncu: its headline, its kernels' times and ncu's why
    [ "${NCU:-1}" = 0 ] && return 0
    # shellcheck disable=SC2086  # NCU_EXTRA is words on purpose
    PERFCONSOLE_DATA_DIR="$D/data0" timeout -k 20 "$LIMIT" "${PC[@]}" run "${BASE[@]}" ${NCU_EXTRA:-} --warmup 5 \
        --steps 20 --profile ncu \
        --json --out-dir "$D/ncu" > "$D/ncu.json" 2> "$D/ncu.err"
    echo "ncu run exit $?" >> "$D/lanes.txt"
    "${PC[@]}" kernels "$D/ncu.json" --why > "$D/why.txt" 2>&1
    "${PC[@]}" kernels "$D/ncu.json" --why --json > "$D/why.json" 2>/dev/null
}
independent() {  # the independent script of a setting (INDEPENDENT: its flags), against that run's record
    timeout -k 20 "$LIMIT" python3 docs/results/probes/independent_model_timing.py ${INDEPENDENT:---bf16-weights \
        --compile --compile-mode reduce-overhead --liger} --against "$1" > "$D/independent.json" 2> "$D/independent.err"
    echo "independent exit $?" >> "$D/lanes.txt"
}
lane1() {  # each setting timed alone (20 steps after 5 warm-up); the first then under the independent script
    local v name first=""
    for v in $VARIANTS; do
        name=${v//[^a-z0-9]/}; name=${name:-none}
        local extra=()
        [ "$v" != none ] && read -r -a extra <<< "${v//+/ }"
        PERFCONSOLE_DATA_DIR="$D/data1" timeout -k 20 "$LIMIT" "${PC[@]}" run "${BASE[@]}" "${extra[@]}" --warmup 5 \
            --steps 20 --json --out-dir "$D/runs" > "$D/run-$name.json" 2> "$D/run-$name.err"
        echo "run $name (${extra[*]:-compile default}) exit $?" >> "$D/lanes.txt"
        [ -z "$first" ] && { first=$name; independent "$D/run-$name.json"; }
    done
}
if [ "$gpus" -ge 2 ]; then
    CUDA_VISIBLE_DEVICES=0 lane0 & a=$!
    CUDA_VISIBLE_DEVICES=1 lane1 & b=$!
    wait $a $b
else
    lane0; lane1
fi
python3 - "$D" <<'PY'
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
print("| run | median step (ms) | MFU | forward / backward / optimizer (ms) | status |")
print("|---|--:|--:|---|---|")
for f in sorted(d.glob("run-*.json")) + [d / "ncu.json"]:
    try:
        r = json.loads(f.read_text())["data"]
    except Exception as e:  # an empty or cut file: the run did not end
        print(f"| {f.stem} | - | - | - | no record ({type(e).__name__}) |")
        continue
    s = r.get("summary") or {}
    ph = [((s.get(k) or {}).get("median")) for k in ("forward_ms", "backward_ms", "optimizer_ms")]
    med = (s.get("total_ms") or {}).get("median")
    mfu = s.get("mfu")
    print(f"| {f.stem} | {med and round(med, 2)} | {mfu and f'{100 * mfu:.1f} %'} | "
          f"{' / '.join('-' if x is None else f'{x:.2f}' for x in ph)} | {r.get('status')} |")
try:
    print("independent:", (d / "independent.json").read_text().strip())
except OSError:
    print("independent: none")
PY
cat "$D/lanes.txt"
tar czf "$D.tgz" -C "$D" --exclude data0 --exclude data1 --exclude '*.ncu-rep' .

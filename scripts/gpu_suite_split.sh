#!/usr/bin/env bash
# The whole GPU test suite in one device call on a two- or four-GPU machine (nvidia-h100-x2, nvidia-h200-x2,
# nvidia-h100-x4, nvidia-h200-x4), within CAP seconds, in phases, each part a pytest process with its own data
# folder, pinned to its GPUs (CUDA_VISIBLE_DEVICES) and to its share of the CPU cores (taskset: one part's
# torch.compile workers must not slow another's host-paced steps):
#   1. the tests that time something, a part alone on each GPU, side by side, so no timing shares one;
#   2. the tests marked `shares_gpu` (they time nothing and hold little GPU memory), two parts on each GPU;
#   3. the tests marked `two_gpus`: on GPUs 0,1 (and, on four GPUs, a second part on 2,3 beside it);
#   4. on four GPUs, the tests marked `four_gpus`, on all four (on two they are not collected).
# scripts/gpu_suite_parts.py makes the parts from the `-m gpu` collection itself, balanced by the times in
# tests/gpu_durations_<GPU model>.json where there is one for this machine's GPUs, else tests/gpu_durations.json,
# and checks that every collected test is in exactly one part. Run from the
# repository root on the GPU machine:
#   source scripts/device_env.sh && RUN=1 bash scripts/gpu_suite_split.sh
# SELECT (test files or node ids, words) runs part of the suite the same way, where a call cannot hold the whole.
# GPUS=2 lays the suite out as on a two-GPU machine on GPUs 0 and 1 of a bigger one (the four-GPU tests then not
# collected), leaving the others to other work: start it under `taskset -c` to give it its share of the cores too.
# Everything lands in $OUT/suite-$RUN/ and is packed into $OUT/suite-$RUN.tgz; the times this run recorded
# (its JUnit files; a test that did not run keeps its old time) go to $OUT/gpu_durations.json, to be
# committed as the file the run read (or as its model's) so that the next run's parts are balanced by them.
CAP=${CAP:-575}  # a 600 s call: scripts/device_env.sh before, the durations and the tarball after
T0=$(date +%s)
source scripts/gpu_suite_setup.sh
finish() {  # status: the PASSED/FAILED line, the failures, the tarball
    echo "gpu suite split: $([ "$1" = 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - T0 )) s" \
        | tee -a "$D/result.txt"
    grep -hE "^(FAILED|ERROR)" "$D"/pytest-*.log 2>/dev/null | head -20 | tee -a "$D/result.txt"
    tar czf "$OUT/suite-$RUN.tgz" -C "$OUT" "suite-$RUN" && rm -rf "$D"
    exit "$1"
}
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c .)
if [ "$gpus" -lt 2 ]; then
    echo "this machine has $gpus GPU(s): gpu_suite_split.sh needs two (scripts/gpu_suite.sh runs the suite on one)" \
        | tee "$D/result.txt"
    finish 1
fi
G=$(( gpus >= 4 ? 4 : 2 ))  # the layout: four GPUs where there are four or more, else two
if [ -n "${GPUS:-}" ]; then
    if [ "$GPUS" != 2 ] && [ "$GPUS" != 4 ] || [ "$GPUS" -gt "$gpus" ]; then
        echo "GPUS=$GPUS: the layouts are 2 and 4 GPUs, and this machine has $gpus" | tee "$D/result.txt"
        finish 1
    fi
    G=$GPUS
fi
# The times recorded on this GPU model where there are some (an H100 part runs longer than an H200's), else the
# default file: tests/gpu_durations_<model>.json, the model as nvidia-smi names it, lower case, `_` for the rest.
model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '_')
DUR="tests/gpu_durations_${model%_}.json"
[ -f "$DUR" ] || DUR=tests/gpu_durations.json
echo "times from $DUR (GPU model: ${model%_})" | tee "$D/result.txt"
# shellcheck disable=SC2086  # IGNORES is words on purpose
python3 scripts/gpu_suite_parts.py split --dir "$D" --gpus "$G" --durations "$DUR" -- $IGNORES ${SELECT:-} 2>&1 \
    | tee -a "$D/result.txt"
[ "${PIPESTATUS[0]}" = 0 ] || finish 1
N=$(nproc)
left() { echo $(( CAP - ($(date +%s) - T0) )); }
part() {  # name gpus cpus: one pytest process over the node ids in $D/part-NAME.txt, its own data folder, log
    local name=$1 gpus=$2 cpus=$3 ids rc
    mapfile -t ids < "$D/part-$name.txt"
    if [ "${#ids[@]}" = 0 ]; then
        echo "part $name: no tests" | tee -a "$D/result.txt"; return 0
    fi
    if [ "$(left)" -le 10 ]; then  # `timeout 0` would mean no limit at all
        echo "part $name: not started, no time left of CAP=$CAP s" | tee -a "$D/result.txt"; return 1
    fi
    CUDA_VISIBLE_DEVICES=$gpus PERFCONSOLE_DATA_DIR="$D/data-$name" timeout -k 20 "$(left)" taskset -c "$cpus" \
        python3 -m pytest -m gpu "${ids[@]}" -q -p no:cacheprovider -rA --durations=25 \
        --junitxml="$D/junit-$name.xml" > "$D/pytest-$name.log" 2>&1
    rc=$?
    # A part whose tests all skipped (no GPU, one GPU for the two-GPU tests) ran nothing: not a pass.
    grep -q " passed" "$D/pytest-$name.log" || { [ $rc = 0 ] && rc=1; }
    echo "part $name (CUDA_VISIBLE_DEVICES=$gpus, CPUs $cpus) exit $rc at $(( $(date +%s) - T0 )) s:" \
        "$(tail -1 "$D/pytest-$name.log")" | tee -a "$D/result.txt"
    return $rc
}
# The phases of $D/layout.txt one after the other, the parts of a phase side by side, the cores shared out evenly.
rs=0
for phase in $(cut -d' ' -f1 "$D/layout.txt" | uniq); do
    mapfile -t here < <(awk -v p="$phase" '$1 == p {print $2 " " $3}' "$D/layout.txt")
    k=${#here[@]} share=$(( N / ${#here[@]} )) pids=()
    for i in "${!here[@]}"; do
        read -r name devices <<< "${here[$i]}"
        part "$name" "$devices" "$(( i * share ))-$(( i == k - 1 ? N - 1 : (i + 1) * share - 1 ))" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rs=1; done
done
# Every collected test must be in a JUnit file: one that is not did not run (a part cut off by the CAP).
python3 scripts/gpu_suite_parts.py durations --dir "$D" --previous "$DUR" \
    --out "$OUT/gpu_durations.json" 2>&1 | tee -a "$D/result.txt"
rd=${PIPESTATUS[0]}  # the durations' own status: read before the next pipeline replaces it
echo "commit $OUT/gpu_durations.json as tests/gpu_durations_${model%_}.json (or $DUR)" | tee -a "$D/result.txt"
finish $(( rs || rd ))

#!/usr/bin/env bash
# The whole GPU test suite in one device call on a two-GPU machine (nvidia-h200-x2), in under the call's
# 600 s: the one-GPU test files in two pytest processes side by side, each pinned to one GPU
# (CUDA_VISIBLE_DEVICES) and to half the CPU cores (taskset: one part's torch.compile workers must not
# slow the other's host-paced steps), each with its own data folder, so no timing shares a GPU; then the two-GPU
# data-parallel file alone on both. Every test marked `gpu` runs: the script collects `-m gpu` whole
# first and fails if the three parts do not add up to it. Run from the repository root on the GPU machine:
#   source scripts/device_env.sh && RUN=1 bash scripts/gpu_suite_split.sh
# Everything lands in $OUT/suite-$RUN/ and is packed into $OUT/suite-$RUN.tgz.
CAP=${CAP:-540}
T0=$(date +%s)
source scripts/gpu_suite_setup.sh
A=(tests/tui/test_console_gpu.py tests/core/grids/test_attention.py tests/core/telemetry/test_recorder.py
   tests/core/measure/test_peaks_fast_paths.py tests/core/measure/test_collectives_gpu.py)
B=(tests/core/measure/test_phase_ranges.py tests/core/measure/test_gpu_timing.py
   tests/core/measure/test_memory_profile.py tests/core/profiling/test_nsys_gpu.py)
C=(tests/core/launch/test_data_parallel_gpu.py)
# shellcheck disable=SC2086  # IGNORES is words on purpose
count() { python3 -m pytest -m gpu --collect-only -q -p no:cacheprovider $IGNORES "$@" 2>/dev/null | grep -c '::'; }
whole=$(count); parts=$(count "${A[@]}" "${B[@]}" "${C[@]}")
echo "gpu tests collected: $whole whole, $parts in the three parts" | tee "$D/result.txt"
N=$(nproc)
left() { echo $(( CAP - ($(date +%s) - T0) )); }
part() {  # name gpus files...: one pytest process, its own data folder, log and JUnit file
    local name=$1 gpus=$2 cpus=$3; shift 3
    CUDA_VISIBLE_DEVICES=$gpus PERFCONSOLE_DATA_DIR="$D/data-$name" timeout -k 20 "$(left)" taskset -c "$cpus" \
        python3 -m pytest -m gpu "$@" -q -p no:cacheprovider -rA --durations=25 \
        --junitxml="$D/junit-$name.xml" > "$D/pytest-$name.log" 2>&1
    local rc=$?
    echo "part $name (CUDA_VISIBLE_DEVICES=$gpus, CPUs $cpus) exit $rc at $(( $(date +%s) - T0 )) s: $(tail -1 "$D/pytest-$name.log")" \
        | tee -a "$D/result.txt"
    return $rc
}
part gpu0 0 "0-$(( N / 2 - 1 ))" "${A[@]}" & pa=$!
part gpu1 1 "$(( N / 2 ))-$(( N - 1 ))" "${B[@]}" & pb=$!
wait $pa; ra=$?; wait $pb; rb=$?
part both 0,1 "0-$(( N - 1 ))" "${C[@]}"; rc=$?
# A part whose tests all skipped (no GPU, one GPU for the data-parallel file) ran nothing: not a pass.
ran=$(grep -l " passed" "$D"/pytest-gpu0.log "$D"/pytest-gpu1.log "$D"/pytest-both.log 2>/dev/null | wc -l)
status=$(( ra || rb || rc || whole != parts || ran != 3 ))
echo "gpu suite split: $([ $status = 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - T0 )) s" | tee -a "$D/result.txt"
grep -hE "^(FAILED|ERROR)" "$D"/pytest-*.log | head -20 | tee -a "$D/result.txt"
tar czf "$OUT/suite-$RUN.tgz" -C "$OUT" "suite-$RUN" && rm -rf "$D"
exit $status

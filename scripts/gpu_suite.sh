#!/usr/bin/env bash
# The whole GPU test suite in one device call, its log and a JUnit file kept; then, while time is left,
# EXTRA (a command line) runs after it. Run from the repository root on the GPU machine:
#   source scripts/device_env.sh && RUN=1 CAP=420 bash scripts/gpu_suite.sh
# ARGS (words) go to pytest after `-m gpu`: the whole suite needs more than one call's 450 s on 2x H200, so
# one call can take ARGS="--ignore=tests/core/launch/test_data_parallel_gpu.py" and the next
# ARGS="tests/core/launch/test_data_parallel_gpu.py".
# Everything lands in $OUT/suite-$RUN/ (EXTRA sees it as $D) and is packed into $OUT/suite-$RUN.tgz (a call
# returns few files).
CAP=${CAP:-420}
source scripts/gpu_suite_setup.sh
export D PERFCONSOLE_DATA_DIR="$D/data"
ARGS="${ARGS:-} $IGNORES"
start=$(date +%s)
# shellcheck disable=SC2086  # ARGS is words on purpose
timeout -k 20 "$CAP" python3 -m pytest -m gpu ${ARGS:-} -q -p no:cacheprovider -rA --durations=25 \
    --junitxml="$D/junit.xml" > "$D/pytest.log" 2>&1
echo "pytest -m gpu ${ARGS:-} exit $? in $(( $(date +%s) - start )) s" | tee "$D/result.txt"
tail -4 "$D/pytest.log" | tee -a "$D/result.txt"
grep -E "^(FAILED|ERROR)" "$D/pytest.log" | head -20
if [ -n "${EXTRA:-}" ]; then
    start=$(date +%s)
    bash -c "$EXTRA" > "$D/extra.log" 2>&1
    echo "extra exit $? in $(( $(date +%s) - start )) s" | tee -a "$D/result.txt"
    tail -30 "$D/extra.log"
fi
tar czf "$OUT/suite-$RUN.tgz" -C "$OUT" "suite-$RUN" && rm -rf "$D"

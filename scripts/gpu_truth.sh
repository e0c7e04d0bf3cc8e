#!/usr/bin/env bash
# Numbers you can trust on a GPU: every kernel in its phase, and what profiling costs.
# Run from the repository root on the GPU machine (source scripts/device_env.sh first). Snapshots and
# logs go to $OUT; the evidence (JSON and Markdown) to docs/results/, each with its command and device.
#
# SECTIONS picks what runs (default: tests xl):
#   telemetry: the gpu telemetry test, and scripts/telemetry_overhead.py on xl and 2.7B bf16 (the
#              parent's sampler switched on and off inside one process)
#   tests:     the gpu tests of the phase ranges (autograd's thread; medium fp32 under torch and nsys)
#   xl:        xl, ctx 512, batch 4, bf16, train, 3 warm-up + 8 measured steps, under nsys and under the
#              torch profiler: per-phase kernel time against the timed phases, unattributed share
#   e27:       2.7B, ctx 512, batch 4, bf16, train, eager, the same under nsys and torch (GPU-bound,
#              where kernel time per phase can be held against the timed phase)
#   flight:    the gpu test of a step in flight, and docs/results/probes/step_in_flight.py for 2.7B and
#              xl: the default timing and --step-sync, each beside an independent timing
#   compiled:  2.7B, ctx 512, batch 4, bf16, train, sdpa + torch.compile, 3 warm-up + 8 steps, under
#              the torch profiler and under nsys: the profiled steps against the quiet ones
set -uo pipefail
# The device brings back at most 8 files: the work goes to $WORK, and $OUT gets the timeline and one tarball.
FINAL=${OUT:-"$PWD/out-truth"}
OUT=${WORK:-/tmp/truth-work}
RES=docs/results
mkdir -p "$OUT" "$RES" "$FINAL"
export PERFCONSOLE_DATA_DIR="$OUT/data"
PC=(python3 -m perfconsole.tui.main)
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z')
T0=$(date +%s)
section() { echo "== $1 at $(( $(date +%s) - T0 )) s" | tee -a "$OUT/timeline.log"; }
measure() {  # name cap args...: one run, its output and log kept
    local name=$1 cap=$2; shift 2
    timeout -s INT -k 20 "$cap" "${PC[@]}" "$@" > "$OUT/$name.txt" 2> "$OUT/$name.log"
    echo "$name exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/timeline.log"
}
{ nvidia-smi; python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"; nsys --version; } \
    > "$OUT/environment.txt" 2>&1
SECTIONS=${SECTIONS:-"tests xl"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

if want tests; then
    section tests
    timeout 300 python3 -m pytest -q -m gpu tests/core/measure/test_phase_ranges.py ${TESTS_K:+-k "$TESTS_K"} > "$OUT/tests.txt" 2>&1
    echo "tests exit $?" | tee -a "$OUT/timeline.log"; tail -3 "$OUT/tests.txt"
fi

XL=(run --size xl --ctx 512 --batch 4 --precision bf16 --mode train --warmup 3 --steps 8 --device cuda)
if want xl; then
    section "xl bf16 train under nsys and torch"
    measure xl_nsys 240 "${XL[@]}" --profile nsys --force --save "$OUT/xl_nsys.json"
    measure xl_torch 240 "${XL[@]}" --profile torch --force --save "$OUT/xl_torch.json"
    CMD="perfconsole ${XL[*]} --profile nsys|torch --save ..."
    python3 scripts/attribution_evidence.py "$RES/attribution_xl_bf16_$DEV.json" \
        "$CMD (run by \`SECTIONS=xl bash scripts/gpu_truth.sh\`)" "$OUT/xl_nsys.json" "$OUT/xl_torch.json"
    for p in nsys torch; do
        "${PC[@]}" export "$OUT/xl_$p.json" --format md --force -o "$RES/attribution_xl_bf16_${DEV}_$p.md" \
            && python3 scripts/note_command.py "$RES/attribution_xl_bf16_${DEV}_$p.md" \
               "perfconsole ${XL[*]} --profile $p" "SECTIONS=xl bash scripts/gpu_truth.sh"
    done
fi

E27=(run --size 2.7B --ctx 512 --batch 4 --precision bf16 --mode train --warmup 3 --steps 8 --device cuda)
if want e27; then
    section "2.7B bf16 train (eager) under nsys and torch"
    measure e27_nsys 240 "${E27[@]}" --profile nsys --force --save "$OUT/e27_nsys.json"
    measure e27_torch 240 "${E27[@]}" --profile torch --force --save "$OUT/e27_torch.json"
    python3 scripts/attribution_evidence.py "$RES/attribution_2.7B_bf16_$DEV.json" \
        "perfconsole ${E27[*]} --profile nsys|torch --save ... (run by \`SECTIONS=e27 bash scripts/gpu_truth.sh\`)" \
        "$OUT/e27_nsys.json" "$OUT/e27_torch.json"
fi

C27=(run --size 2.7B --ctx 512 --batch 4 --precision bf16 --mode train --attention sdpa --compile --warmup 3 --steps 8 --device cuda)
if want compiled; then
    section "2.7B compiled under torch and nsys"
    measure c27_torch 300 "${C27[@]}" --profile torch --force --save "$OUT/c27_torch.json"
    measure c27_nsys 300 "${C27[@]}" --profile nsys --force --save "$OUT/c27_nsys.json"
    python3 scripts/attribution_evidence.py "$RES/profile_overhead_2.7B_compiled_$DEV.json" \
        "perfconsole ${C27[*]} --profile torch|nsys --save ... (run by \`SECTIONS=compiled bash scripts/gpu_truth.sh\`)" \
        "$OUT/c27_torch.json" "$OUT/c27_nsys.json"
fi
if want flight; then
    section "a step in flight against a synchronised step"
    timeout 200 python3 -m pytest -q -m gpu tests/core/measure/test_gpu_timing.py -k flight > "$OUT/flight_test.txt" 2>&1
    echo "flight test exit $?" | tee -a "$OUT/timeline.log"; tail -2 "$OUT/flight_test.txt"
    timeout 300 python3 docs/results/probes/step_in_flight.py "$RES/step_in_flight_$DEV.md" ${FLIGHT_SIZES:---size 2.7B --size xl} \
        > "$OUT/step_in_flight.txt" 2>&1
    echo "step in flight exit $?" | tee -a "$OUT/timeline.log"; tail -8 "$OUT/step_in_flight.txt"
fi
if want telemetry; then
    section "telemetry: the gpu test, and what sampling costs (xl bf16, on/off alternated)"
    timeout 120 python3 -m pytest -q -m gpu tests/core/telemetry > "$OUT/telemetry_tests.txt" 2>&1
    echo "telemetry tests exit $?" | tee -a "$OUT/timeline.log"; tail -2 "$OUT/telemetry_tests.txt"
    timeout 300 python3 scripts/telemetry_overhead.py "$RES/telemetry_overhead_$DEV.md" --size xl --size 2.7B --steps 80 \
        > "$OUT/telemetry_overhead.txt" 2>&1
    echo "telemetry overhead exit $?" | tee -a "$OUT/timeline.log"; tail -3 "$OUT/telemetry_overhead.txt"
fi
section done
for f in "$RES"/attribution_*"$DEV"*.json "$RES"/profile_overhead_*"$DEV"*.json; do
    [[ -f $f ]] && python3 -c "import json,sys; d=json.load(open(sys.argv[1]))
for r in d['runs']:
    o=r.get('overhead') or {}
    print(sys.argv[1].split('/')[-1], r.get('profiler'), 'unattributed', r.get('unattributed_share'),
          {k: (v['per_step_ms'], v['timed_ms'], v['rel_diff']) for k, v in (r.get('phases') or {}).items()},
          'overhead', o.get('ratio'), 'k/step', o.get('kernels_per_step'))" "$f"
done
# Everything in one file: the device tool brings back a handful of files per call.
tar czf "$FINAL/truth.tgz" "$RES" $(ls "$OUT"/*.json "$OUT"/*.txt "$OUT"/*.log 2>/dev/null) 2>/dev/null
cp "$OUT/timeline.log" "$FINAL/" 2>/dev/null
ls -la "$FINAL/truth.tgz"

#!/usr/bin/env bash
# Data parallel's own cost on one GPU (docs/results/probes/wrap_one_gpu.py, one rank, no link): the unwrapped model
# against perfconsole's DDP or FSDP wrap with each setting, eager and compiled.
# SECTIONS="fsdp" (default; then the collectives' GPU tests), "ddp", "ddpmodes" (compiled DDP under each of
# torch._dynamo.config.optimize_ddp's modes), or several.
# Run from the repository root on a one-GPU machine after `source scripts/device_env.sh`; logs under $OUT,
# packed into $OUT/all.tgz at the end (a call returns a handful of files, not dozens).
set -uo pipefail
OUT=${OUT:-"$PWD/out-wrap-one"}
mkdir -p "$OUT"
SIZE=${SIZE:-2.7B}
SECTIONS=${SECTIONS:-fsdp}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
T0=$(date +%s)
NAMES=()
one() {  # name cap args...
    local name=$1 cap=$2; shift 2
    NAMES+=("$name")
    timeout -k 20 "$cap" torchrun --standalone --nproc-per-node 1 docs/results/probes/wrap_one_gpu.py --size "$SIZE" "$@" \
        > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
    echo "$name exit $? ($(( $(date +%s) - T0 )) s): wrap_one_gpu.py --size $SIZE $*" | tee -a "$OUT/timeline.log"
}
one plain 120 --wrap none
if want fsdp; then
    one fsdp 120 --wrap fsdp
    one fsdp_bf16 120 --wrap fsdp --bf16
    one fsdp_noreshard 120 --wrap fsdp --no-reshard
    one fsdp_bf16_noreshard 120 --wrap fsdp --bf16 --no-reshard
fi
if want ddp; then
    one ddp 120 --wrap ddp
    one ddp_all 120 --wrap ddp --bucket-mb 100 --bucket-view --bf16-hook
fi
one plain_compile 180 --wrap none --compile
if want fsdp; then
    one fsdp_compile 180 --wrap fsdp --compile
    one fsdp_bf16_noreshard_compile 180 --wrap fsdp --bf16 --no-reshard --compile
fi
if want ddp; then
    one ddp_compile 180 --wrap ddp --compile
    one ddp_all_compile 180 --wrap ddp --bucket-mb 100 --bucket-view --bf16-hook --compile
fi
if want ddpmodes; then
    want ddp || one ddp_compile 180 --wrap ddp --compile
    one ddp_compile_noopt 180 --wrap ddp --compile --optimize-ddp no_optimization
    one ddp_all_compile_noopt 180 --wrap ddp --bucket-mb 100 --bucket-view --bf16-hook --compile --optimize-ddp no_optimization
fi
if want fsdp; then
    timeout 240 python3 -m pytest -q -m gpu tests/core/measure/test_collectives_gpu.py > "$OUT/tests.txt" 2>&1
    echo "tests exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/timeline.log"; tail -2 "$OUT/tests.txt"
fi
python3 - "$OUT" "${NAMES[@]}" <<'PY'
import json, sys
from pathlib import Path
out, names = Path(sys.argv[1]), sys.argv[2:]
rows = {}
for n in names:
    lines = (out / f"{n}.jsonl").read_text().splitlines() if (out / f"{n}.jsonl").is_file() else []
    rows[n] = json.loads(lines[-1]) if lines else None
print("| variant | step (ms) | CUDA events (ms) | issue (ms) | issue / step | against unwrapped | peak alloc (MiB) |")
print("| --- | --: | --: | --: | --: | --: | --: |")
for n in names:
    r = rows[n]
    if r is None:
        print(f"| {n} | failed (see {n}.log) | | | | | |")
        continue
    base = rows.get("plain_compile" if r["compile"] else "plain")
    vs = f"{r['median_step_ms'] / base['median_step_ms']:.3f}x" if base else "-"
    print(f"| {n} | {r['median_step_ms']:.1f} | {r['median_events_ms']:.1f} | {r['median_issue_ms']:.1f} "
          f"| {r['issue_share']:.0%} | {vs} | {r['peak_alloc_mib']:,.0f} |")
PY
tar czf /tmp/wrap_one_out.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/wrap_one_out.tgz "$OUT/all.tgz"

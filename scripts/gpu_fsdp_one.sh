#!/usr/bin/env bash
# FSDP's own cost on one GPU (scripts/fsdp_one_gpu.py, one rank, no link): the unwrapped model against
# perfconsole's FSDP wrap with each setting, eager and compiled; then the collectives' GPU tests.
# Run from the repository root on a one-GPU machine after `source scripts/device_env.sh`; logs under $OUT,
# packed into $OUT/all.tgz at the end (a call returns a handful of files, not dozens).
set -uo pipefail
OUT=${OUT:-"$PWD/out-fsdp-one"}
mkdir -p "$OUT"
SIZE=${SIZE:-2.7B}
T0=$(date +%s)
one() {  # name cap args...
    local name=$1 cap=$2; shift 2
    timeout -k 20 "$cap" torchrun --standalone --nproc-per-node 1 scripts/fsdp_one_gpu.py --size "$SIZE" "$@" \
        > "$OUT/$name.jsonl" 2> "$OUT/$name.log"
    echo "$name exit $? ($(( $(date +%s) - T0 )) s): fsdp_one_gpu.py --size $SIZE $*" | tee -a "$OUT/timeline.log"
}
one plain 120 --wrap none
one fsdp 120 --wrap fsdp
one fsdp_bf16 120 --wrap fsdp --bf16
one fsdp_noreshard 120 --wrap fsdp --no-reshard
one fsdp_bf16_noreshard 120 --wrap fsdp --bf16 --no-reshard
one plain_compile 180 --wrap none --compile
one fsdp_compile 180 --wrap fsdp --compile
one fsdp_bf16_noreshard_compile 180 --wrap fsdp --bf16 --no-reshard --compile
timeout 240 python3 -m pytest -q -m gpu tests/core/measure/test_collectives_gpu.py > "$OUT/tests.txt" 2>&1
echo "tests exit $? ($(( $(date +%s) - T0 )) s)" | tee -a "$OUT/timeline.log"; tail -2 "$OUT/tests.txt"
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
names = ["plain", "fsdp", "fsdp_bf16", "fsdp_noreshard", "fsdp_bf16_noreshard", "plain_compile", "fsdp_compile",
         "fsdp_bf16_noreshard_compile"]
rows = {}
for n in names:
    lines = (out / f"{n}.jsonl").read_text().splitlines() if (out / f"{n}.jsonl").is_file() else []
    rows[n] = json.loads(lines[-1]) if lines else None
print("| variant | step (ms) | CUDA events (ms) | issue (ms) | issue / step | against plain | peak alloc (MiB) |")
print("| --- | --: | --: | --: | --: | --: | --: |")
for n in names:
    r = rows[n]
    if r is None:
        print(f"| {n} | failed (see {n}.log) | | | | | |")
        continue
    base = rows["plain_compile" if r["compile"] else "plain"]
    vs = f"{r['median_step_ms'] / base['median_step_ms']:.3f}x" if base else "-"
    print(f"| {n} | {r['median_step_ms']:.1f} | {r['median_events_ms']:.1f} | {r['median_issue_ms']:.1f} "
          f"| {r['issue_share']:.0%} | {vs} | {r['peak_alloc_mib']:,.0f} |")
PY
tar czf /tmp/fsdp_one_out.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/fsdp_one_out.tgz "$OUT/all.tgz"

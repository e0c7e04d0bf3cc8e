#!/usr/bin/env bash
# Two probes for the ladder, on the GPU machine after `source scripts/device_env.sh`:
# which liger swap trains wrongly (small, eager and compiled) and what bf16 weights buy on 2.7B.
# Writes docs/results/liger_probe_<device>.md and bf16_weights_probe_<device>.md; logs to $OUT.
set -uo pipefail
RES=docs/results; OUT=${OUT:-/tmp/probes}; mkdir -p "$RES" "$OUT"
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/NVIDIA //; s/ .*//' | tr 'A-Z' 'a-z')
note() { printf '\nCommand: `%s` (run by `bash docs/results/probes/gpu_probes.sh`)\n\nDevice: %s, driver %s.\n' "$1" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
    "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)" >> "$2"; }
T0=$(date +%s)
timeout -k 10 "${CAP_LIGER:-260}" python3 docs/results/probes/liger_probe.py --size small --steps 4 \
    > "$RES/liger_probe_$DEV.md" 2> "$OUT/liger_probe.log"
echo "liger probe exit $? at $(( $(date +%s) - T0 )) s"
note "python3 docs/results/probes/liger_probe.py --size small --steps 4" "$RES/liger_probe_$DEV.md"
timeout -k 10 "${CAP_BF16:-260}" python3 docs/results/probes/bf16_weights_probe.py --size 2.7B --steps 10 \
    > "$RES/bf16_weights_probe_$DEV.md" 2> "$OUT/bf16_probe.log"
echo "bf16 probe exit $? at $(( $(date +%s) - T0 )) s"
note "python3 docs/results/probes/bf16_weights_probe.py --size 2.7B --steps 10" "$RES/bf16_weights_probe_$DEV.md"
cp "$RES"/liger_probe_"$DEV".md "$RES"/bf16_weights_probe_"$DEV".md "$OUT/"
cat "$RES"/liger_probe_"$DEV".md "$RES"/bf16_weights_probe_"$DEV".md; tail -n 5 "$OUT"/*.log

#!/usr/bin/env bash
# The last GPU call of a session with little device time left: the small ladder (one process a rung, with
# its profiler pass), and two single 2.7B runs that the 2.7B ladder could not finish in its call:
# fp8 on top of the CUDA-graphs rung, and liger without CUDA graphs (the liger rung, which also had CUDA
# graphs, trained wrongly: its loss stuck at 9.1875 = ln(10000) in bf16). Run from the repository root
# after `source scripts/device_env.sh`. $OUT gets the timeline and one tarball.
set -uo pipefail
FINAL=${OUT:-"$PWD/out-final"}
W=${WORK:-/tmp/final-work}
RES=docs/results
mkdir -p "$W" "$RES" "$FINAL"
export PERFCONSOLE_DATA_DIR="$W/data"
PC=(python3 -m perfconsole.tui.main)
T0=$(date +%s)
log() { echo "$1 ($(( $(date +%s) - T0 )) s)" | tee -a "$W/timeline.log"; }
SECTIONS=small WORK="$W/ladder" OUT="$W/ladder-out" CAP_SMALL=170 REPEAT_SMALL=1 SMALL_PROFILE=1 bash scripts/gpu_ladder.sh > "$W/ladder.txt" 2>&1
log "small ladder exit $?"
tar czf "$FINAL/small.tgz" "$RES"/ladder_small_* "$W"/ladder/*.json "$W"/ladder/*.txt "$W"/ladder/*.log 2>/dev/null
R27=(run --size 2.7B --ctx 512 --batch 4 --precision bf16 --mode train --attention sdpa --compile --warmup 3 --steps 8 --device cuda)
timeout -s INT -k 10 110 "${PC[@]}" "${R27[@]}" --compile-mode reduce-overhead --fp8 --force --save "$W/fp8.json" > "$W/fp8.txt" 2> "$W/fp8.log"
log "2.7B cuda-graphs + fp8 exit $?"
cp "$W/fp8.json" "$W/fp8.txt" "$FINAL/" 2>/dev/null
timeout -s INT -k 10 110 "${PC[@]}" "${R27[@]}" --kernels liger --profile torch --out-dir "$W/liger-prof" --force --save "$W/liger.json" > "$W/liger.txt" 2> "$W/liger.log"
log "2.7B compile + liger (no CUDA graphs) exit $?"
for f in fp8 liger; do
  [[ -f "$W/$f.json" ]] && python3 - "$W/$f.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
s = d.get("summary") or {}
p = d.get("profile") or {}
k = (p.get("tables") or {}).get("cuda_gpu_kern_sum") or []
steps = (p.get("overhead") or {}).get("profiled_steps") or 1
adam = [r for r in k if "multi_tensor_apply" in r["name"]]
if k:
    print("kernel ms per profiled step", round(sum(r["total_time_ns"] for r in k) / 1e6 / steps, 2),
          "fused adam instances per step", sum(r["instances"] for r in adam) / steps,
          "adam ms per step", round(sum(r["total_time_ns"] for r in adam) / 1e6 / steps, 2))
print(sys.argv[1].split("/")[-1], d["status"], "median", (s.get("total_ms") or {}).get("median"),
      "losses", [round(x["loss"], 4) for x in (d.get("warmup_steps") or []) + d["steps"] if x.get("loss") is not None][:6],
      (d.get("error") or {}).get("message"))
PY
done
cat "$W/ladder.txt" | tail -15
tar czf "$FINAL/final.tgz" "$W"/*.json "$W"/*.txt "$W"/*.log 2>/dev/null
cp "$W/timeline.log" "$FINAL/"
ls -la "$FINAL"

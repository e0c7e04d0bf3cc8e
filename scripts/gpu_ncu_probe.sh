#!/usr/bin/env bash
# Why `--profile ncu` on the ncu GPU test's spec (medium, ctx 1024, batch 32, bf16 train) does not end on H100 hosts
# while it ended in about 90 s on H200 hosts (docs/results/gpu_suite_2xh100_20261127.md: the worker under ncu at a
# full core, its resident memory rising by some 46 GiB and falling back every 100 to 125 s). The same run at batch 8
# (about a quarter of the activations) and at batch 32, each with a time limit, ncu's own log kept, and a `ps` of
# the ncu and worker processes (elapsed s, CPU %, RSS KiB) and the launches ncu has profiled so far every 10 s
# beside it: if the time per profiled launch in
# ncu's log scales with the process's memory, the replay's save and restore of device memory is what takes it.
# From the repository root on the GPU machine: source scripts/device_env.sh && bash scripts/gpu_ncu_probe.sh
set -uo pipefail
D=${D:-/tmp/ncuprobe}
mkdir -p "$D"
export PERFCONSOLE_DATA_DIR="$D/data"
CAP=${CAP:-270}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; git rev-parse --short HEAD;
  command -v ncu; ncu --version 2>&1 | tail -1; } > "$D/environment.txt" 2>&1
for b in 8 32; do
    name="ncu_b$b"
    (while sleep 10; do echo "t $(date +%s) launches $(grep -c '==PROF== Profiling' "$D/$name/ncu.log" 2>/dev/null)"
        ps -eo pid,etimes,pcpu,rss,args | grep -E "[n]cu|[m]easure[.]worker"; done) > "$D/$name.ps.txt" 2>&1 &
    watcher=$!
    t0=$(date +%s)
    timeout -s INT -k 20 "$CAP" python3 -m perfconsole.tui.main run --size medium --ctx 1024 --batch "$b" \
        --precision bf16 --mode train --attention sdpa --device cuda --warmup 3 --steps 10 --profile ncu \
        --out-dir "$D/$name" --save "$D/$name.json" --force > "$D/$name.txt" 2>&1
    echo "$name exit $? after $(( $(date +%s) - t0 )) s" | tee -a "$D/result.txt"
    kill "$watcher" 2>/dev/null
    pkill -9 -x ncu 2>/dev/null; pkill -9 -f 'measure[.]worker' 2>/dev/null
    # ncu's log: one line a profiled launch, with its passes; the count of lines is the launches done
    [ -f "$D/$name/ncu.log" ] && grep -c "==PROF== Profiling" "$D/$name/ncu.log" | sed "s/^/$name launches profiled: /" \
        | tee -a "$D/result.txt"
done
[ -n "${OUT:-}" ] && tar czf "$OUT/ncuprobe.tgz" -C "$D" --exclude=./data --exclude='*.ncu-rep' . 2>/dev/null
cat "$D/result.txt"

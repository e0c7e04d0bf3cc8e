#!/usr/bin/env bash
# perfconsole's quiet DDP step against scripts/independent_ddp.py, interleaved (P I P I ...) so that the
# machine's drift between runs falls on both: SIZE (default 2.7B) bf16 train, ctx 512, batch 4 per rank, sdpa, DDP
# defaults. Run from the repository root on a machine with two GPUs; ROUNDS (default 2) pairs; files under $D.
# Beside each step: the host's issue time per step (perfconsole's host_ms, median) and the caching allocator's
# retries in the measured steps (both programs), since a step at the memory's edge waits on cudaFree.
set -uo pipefail
D=${D:-"$PWD/out-ddp-recheck"}
mkdir -p "$D"
ROUNDS=${ROUNDS:-2}
SIZE=${SIZE:-2.7B}
J=(--size "$SIZE" --ctx 512 --batch 4 --precision bf16 --mode train --attention sdpa --warmup 3 --steps 10 --device cuda
   --nproc 2 --parallel ddp)
for i in $(seq 1 "$ROUNDS"); do
    timeout -k 10 120 python3 -m perfconsole.tui.main run "${J[@]}" --force --save "$D/perfconsole_$i.json" > "$D/perfconsole_$i.txt" 2>&1
    echo "perfconsole round $i exit $?"
    timeout -k 10 90 torchrun --standalone --nproc-per-node 2 scripts/independent_ddp.py --size "$SIZE" --ctx 512 --batch 4 \
        --steps 10 > "$D/independent_$i.jsonl" 2> "$D/independent_$i.log"
    echo "independent round $i exit $?"
done
python3 - "$D" "$ROUNDS" <<'PY'
import json, statistics, sys
from pathlib import Path
d, n = Path(sys.argv[1]), int(sys.argv[2])
ours, theirs = [], []
for i in range(1, n + 1):
    try:
        doc = json.loads((d / f"perfconsole_{i}.json").read_text())["data"]
        ind = json.loads((d / f"independent_{i}.jsonl").read_text().splitlines()[-1])
        host = statistics.median(s["host_ms"] for s in doc["steps"] if s.get("host_ms") is not None)
        ours.append((doc["summary"]["total_ms"]["median"], doc.get("collectives") or {}, host,
                     (doc.get("memory") or {}).get("alloc_retries"), (doc.get("memory") or {}).get("peak_allocated_mib")))
        theirs.append(ind)
    except Exception as exc:  # a round that failed is named, not hidden
        print(f"round {i}: {exc!r}")
f = lambda v, spec=".1f": "-" if v is None else format(v, spec)
print("| round | perfconsole quiet DDP step (ms) | independent DDP script (ms) | difference "
      "| collectives alone, perfconsole (ms) | gradients' all-reduce, independent (ms) "
      "| link bus GB/s, perfconsole | link bus GB/s, independent | host issue per step, perfconsole rank 0 (ms) "
      "| allocator retries, perfconsole (busiest rank) | allocator retries, independent (per rank) "
      "| peak allocated MiB, perfconsole rank 0 | peak allocated MiB, independent (per rank) |")
print("| --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |")
for i, ((a, c, host, retries, peak), b) in enumerate(zip(ours, theirs), 1):
    print(f"| {i} | {a:.1f} | {b['median_step_ms']:.1f} | {a / b['median_step_ms'] - 1:+.1%} | {f(c.get('alone_ms'))} "
          f"| {f(b.get('grads_allreduce_ms'))} | {f(c.get('link_busbw_gbps'))} | {f(b.get('link_busbw_gbps_1gib'))} "
          f"| {f(host)} | {retries} | {b.get('alloc_retries')} | {f(peak, ',.0f')} | {b.get('peak_allocated_mib')} |")
if ours and theirs:
    a, b = statistics.median(x[0] for x in ours), statistics.median(x["median_step_ms"] for x in theirs)
    print(f"| median | {a:.1f} | {b:.1f} | {a / b - 1:+.1%} | | | | | | | | | |")
PY

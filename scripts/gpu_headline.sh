#!/usr/bin/env bash
# One device call for a profiled run's headline and for nothing left behind under nsys
# (docs/results/nsys_headline_h100.md): tests/core/launch/test_profiled_headline_gpu.py (an nsys and a torch-profiler
# run of an eager, host-bound spec, each record's headline proven by its provenance, no times compared) and the mid-nsys-run chaos trials of
# tests/tui/test_chaos.py. From the repository root on the GPU machine, with .device and .chaosdebs carried
# (.chaosdebs: `apt-get download tmux libevent-core-2.1-7 libutempter0`, used where the machine has no tmux):
#   bash scripts/gpu_headline.sh
# The logs and every run's figures land in $OUT; the last lines printed are a short table.
set -uo pipefail
source scripts/device_env.sh
OUT=${OUT:-"$PWD/out-headline"}
mkdir -p "$OUT"
CAP=${CAP:-520}
source scripts/console_on_path.sh
export PERFCONSOLE_EVIDENCE_DIR="$OUT"
{ date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  nsys --version; echo "cpus $(nproc)"; ldd --version | head -1; tmux -V || echo "tmux does not run here"
} > "$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"
# What nsys starts beside the program, and whether it inherits the environment and outlives a normal end.
agents() { python3 -c "
import os, psutil
for p in psutil.process_iter():
    try:
        cl, env = p.cmdline(), p.environ()
        if '--start-agent' in cl or (cl[:1] and cl[0].endswith('nsys')):
            print('$1', p.pid, 'ppid', p.ppid(), 'pgid', os.getpgid(p.pid), 'sid', os.getsid(p.pid),
                  'marked' if env.get('PROBE_MARK') else 'unmarked', ' '.join(cl)[:180])
    except Exception:
        pass"; }
mkdir -p /tmp/probe
PROBE_MARK=1 timeout 40 nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --capture-range=cudaProfilerApi \
    --capture-range-end=stop -o /tmp/probe/p --force-overwrite=true python3 -c "import time; time.sleep(6)" \
    > "$OUT/agent_probe_nsys.txt" 2>&1 &
sleep 4; agents during > "$OUT/agent_probe.txt"; wait; sleep 2; agents after >> "$OUT/agent_probe.txt"
cat "$OUT/agent_probe.txt"
start=$(date +%s)
timeout -k 15 "$CAP" python3 -m pytest -m gpu -p no:cacheprovider -q -s -rA --timeout 420 \
    tests/core/launch/test_profiled_headline_gpu.py tests/tui/test_chaos.py > "$OUT/pytest.log" 2>&1
echo "pytest exit $? in $(( $(date +%s) - start )) s"
ps -eo pid,ppid,pgid,sid,etimes,args | grep -i "nsys" | grep -v grep > "$OUT/nsys_processes_after.txt"
echo "nsys processes left after everything: $(wc -l < "$OUT/nsys_processes_after.txt")"
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/pytest.log" | tail -8
grep -E "^(ok  |FAIL) seed|^seed " "$OUT/pytest.log"
python3 - "$OUT/headline_runs.json" <<'PY'
import json, sys
try:
    runs = json.load(open(sys.argv[1]))["runs"]
except OSError:
    sys.exit("no headline_runs.json")
# By construction (core.measure.provenance): the headline's process names no profiler, the capture's names the
# one asked for. Times are printed, not compared: plain processes of this spec differ by tens of percent here.
print(f"{'run':<8}{'status':<8}{'headline ms':>12}{'profiled ms':>12}  {'headline by':<12}{'capture by':<12}problems")
for r in runs:
    f = lambda v: f"{v:.2f}" if v is not None else "-"
    who = lambda p: ",".join(sorted({x.get("profiler") or "none" for x in (p if isinstance(p, list) else [p]) if x})) or "-"
    print(f"{r['kind']:<8}{r['status']:<8}{f(r['headline_ms']):>12}{f(r['profiled_ms']):>12}  "
          f"{who(r.get('provenance')):<12}{who(r.get('capture_provenance')):<12}{'; '.join(r.get('problems') or []) or '-'}")
PY

#!/usr/bin/env bash
# Where a worker child's start-up time goes on this machine: python + torch import, CUDA context,
# NVML, and a whole attention cell through the CLI; each with and without another process holding
# NVML open (which keeps the driver initialised when persistence mode is off).
# Run on the GPU machine from the repo root after `source scripts/device_env.sh`.
set -u
t() { local s=$EPOCHREALTIME; "$@" >/dev/null 2>&1; printf '%-60.60s %6.2f s\n' "$*" "$(python3 -c "print($EPOCHREALTIME - $s)")"; }
probe() {
    t python3 -c "pass"
    t python3 -c "import torch"
    t python3 -c "import torch; torch.zeros(1, device='cuda')"
    t python3 -c "import torch; torch.zeros(1, device='cuda')"
    t python3 -c "import pynvml; pynvml.nvmlInit()"
    t python3 -m perfconsole.tui.main attention --d 16 --seq 256 --batch 8 --impl naive --warmup 1 --iters 2 --device cuda
    t python3 -m perfconsole.tui.main attention --d 16 --seq 256 --batch 8 --impl naive --warmup 1 --iters 2 --device cuda
}
nvidia-smi --query-gpu=name,persistence_mode,driver_version --format=csv
echo "-- nobody holding the GPU"
probe
echo "-- another process holding NVML open"
python3 -c "import pynvml, time; pynvml.nvmlInit(); time.sleep(600)" & H=$!
sleep 2
probe
kill $H

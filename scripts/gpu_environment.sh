#!/usr/bin/env bash
# Writes the GPU machine's environment to the file named: GPUs, driver, torch and CUDA. Used by gpu_suite.sh
# and gpu_suite_split.sh:  bash scripts/gpu_environment.sh "$D/environment.txt"
# The git line is the device copy's own metadata, which can lag the working tree a call carries; the commit a
# call ran is the one the results page names.
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  git log -1 --format='device copy git metadata (may lag the tree): commit %H %s' 2>/dev/null || true; } > "$1" 2>&1

# source scripts/gpu_suite_setup.sh   (from gpu_suite.sh and gpu_suite_split.sh, CAP set before)
# The suite scripts' common start: strict mode, $OUT/suite-$RUN as $D, the GPU machine's environment in
# $D/environment.txt (GPUs, driver, torch and CUDA; the git line is the device copy's own metadata, which can
# lag the working tree a call carries: the commit a call ran is the one the results page names), and IGNORES,
# the pytest arguments that leave out the serve test files where this machine lacks what they import at
# collection (textual-serve, aiohttp, aiohttp_jinja2; an H200 had aiohttp but not aiohttp_jinja2). None of them
# holds a GPU test; without this pytest stops at the collection error before any test.
set -uo pipefail
OUT=${OUT:-"$PWD/out-suite"}
RUN=${RUN:-1}
D="$OUT/suite-$RUN"
mkdir -p "$D"
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  git log -1 --format='device copy git metadata (may lag the tree): commit %H %s' 2>/dev/null || true; } \
    > "$D/environment.txt" 2>&1
IGNORES=""
if ! python3 -c "import aiohttp, aiohttp_jinja2, textual_serve" 2>/dev/null; then
    IGNORES="--ignore=tests/tui/test_serve_auth.py --ignore=tests/tui/test_serve.py --ignore=tests/tui/test_chaos_serve.py"
    echo "no textual-serve/aiohttp/aiohttp_jinja2 here: the serve test files are not collected" | tee -a "$D/environment.txt"
fi
# The console the chaos tests drive in tmux, on PATH (scripts/console_on_path.sh).
source scripts/console_on_path.sh

"""On one GPU: the collectives' CUDA path (NCCL, CUDA events, the memory check all ranks agree on) runs
and reads DDP's rebuilt buckets. One rank has no link, so only the times are held here; two-GPU
figures are held by tests/core/launch/test_data_parallel_gpu.py."""
import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("collectives_rank.py")


@pytest.mark.gpu
@pytest.mark.parametrize("hook, dtype, size", [("none", "float32", 4), ("bf16", "bfloat16", 2)])
def test_the_collectives_alone_run_on_nccl(hook, dtype, size):
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                           str(SCRIPT), "cuda", hook], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    c = json.loads(done.stdout.strip().splitlines()[-1])
    assert c["source"] == "DDP's buckets" and c["buckets"] >= 2, c
    assert c["dtype"] == dtype and c["bytes"] == size * c["params"], c
    assert c["alone_ms"] > 0 and c["link_ms"] > 0 and c["link_bytes"] == 1 << 30, c

"""On one GPU: the collectives' CUDA path (NCCL, CUDA events, the memory check all ranks agree on) runs
and reads DDP's rebuilt buckets. One rank has no link, so only the times are held here; two-GPU
figures are held by tests/core/launch/test_data_parallel_gpu.py."""
import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("collectives_rank.py")


def rank_figures(parallel: str, hook: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                           str(SCRIPT), "cuda", parallel, hook], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    c = json.loads(done.stdout.strip().splitlines()[-1])
    assert c["alone_ms"] > 0 and c["link_ms"] > 0 and c["link_bytes"] == 1 << 30, c
    return c


@pytest.mark.gpu
@pytest.mark.shares_gpu  # one rank, its times only checked to be there
@pytest.mark.parametrize("hook, dtype, size", [("none", "float32", 4), ("bf16", "bfloat16", 2)])
def test_ddp_s_collectives_alone_run_on_nccl(hook, dtype, size):
    c = rank_figures("ddp", hook)
    assert c["source"] == "DDP's buckets" and c["buckets"] >= 2 and c["ops"] == {"all_reduce": c["buckets"]}, c
    assert c["dtype"] == dtype and c["bytes"] == size * c["params"], c


@pytest.mark.gpu
@pytest.mark.shares_gpu
@pytest.mark.parametrize("bf16, dtype, size", [("none", "float32", 4), ("bf16", "bfloat16", 2)])
def test_fsdp_s_collectives_alone_run_on_nccl(bf16, dtype, size):
    c = rank_figures("fsdp", bf16)
    assert c["ops"] == {"all_gather": 2 * 8 + 1, "reduce_scatter": 8 + 1} and c["units"] == 9, c
    head = 256 * 16 + 16
    assert c["dtype"] == dtype and c["bytes"] == size * (3 * c["params"] - head), c

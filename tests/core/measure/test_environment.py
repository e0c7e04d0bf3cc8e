"""What a run ran on: the collectives' settings (core.measure.environment.comm_env) and how an export says them."""
from __future__ import annotations

from perfconsole.core.measure.environment import Environment, collect, comm_env
from perfconsole.core.reports.run import comm_env_text


def test_only_the_variables_that_decide_how_collectives_run_are_kept_in_name_order():
    environ = {"NCCL_NVLS_ENABLE": "0", "TORCH_NCCL_HIGH_PRIORITY": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "32",
               "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "CUDA_VISIBLE_DEVICES": "0,1",
               "NCCLX": "no", "HOME": "/root", "PATH": "/bin",
               "NCCL_VERSION": "2.28.3-1"}  # an image's label (seen on the GPU machine), not a setting
    assert list(comm_env(environ)) == ["CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS",
                                       "TORCH_NCCL_HIGH_PRIORITY", "TORCH_SYMM_MEM_DISABLE_MULTICAST"]


def test_a_cpu_run_notes_no_nccl_and_the_variables_of_its_process(monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    env = collect("cpu")
    assert env.nccl is None and env.comm_env["NCCL_ALGO"] == "Tree"
    old = Environment.from_dict({k: v for k, v in env.to_dict().items() if k not in ("nccl", "comm_env")})
    assert old.nccl is None and old.comm_env is None  # a record from before these were noted


def test_the_export_line_says_the_version_and_each_variable_or_that_none_was_set():
    line = comm_env_text({"nccl": "2.28.9", "comm_env": {"NCCL_NVLS_ENABLE": "0", "NCCL_PROTO": "LL128"}})
    assert line == "collectives: NCCL 2.28.9; NCCL_NVLS_ENABLE=0, NCCL_PROTO=LL128"
    assert comm_env_text({"nccl": None, "comm_env": {}}) == \
        "collectives: no NCCL (gloo); none of their variables set"

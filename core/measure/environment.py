"""What a run ran on: GPU, driver, torch and CUDA versions, host. Collected inside the worker."""
from __future__ import annotations

import os
import platform
import socket
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Environment:
    device: str
    gpu_name: str | None
    gpu_memory_mib: float | None
    driver: str | None
    torch: str
    cuda: str | None
    python: str
    host: str
    cpu: str
    # "warm" (forked from a process that had imported torch, core.launch.warm), "cold: <why>", or None:
    # a record from before this was noted, or a worker started by hand.
    start: str | None = None
    # torch's intra-op threads (torch.get_num_threads(): OMP_NUM_THREADS, or one a core): a CPU step's time
    # depends on them. None in a record from before this was noted.
    threads: int | None = None
    # NCCL's version (a CUDA build of torch), and the variables set in the process that decide how the collectives run:
    # NCCL's own, torch's for NCCL and symmetric memory, NVSHMEM's and CUDA's hardware queues (COMM_VARS). A job's
    # figures hold for the machine as it was set: with NVLink SHARP off (NCCL_NVLS_ENABLE=0) NCCL all-reduces on the
    # GPUs' SMs. None in a record from before this was noted.
    nccl: str | None = None
    comm_env: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Environment:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


COMM_VARS = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_", "CUDA_DEVICE_MAX_CONNECTIONS")


def comm_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (the process's) that decide how collectives run, by name."""
    environ = os.environ if environ is None else environ
    # NCCL_VERSION is a container image's label (NVIDIA's images set it), which NCCL does not read: the version that
    # ran is `nccl_version`'s
    return {k: environ[k] for k in sorted(environ) if k.startswith(COMM_VARS) and k != "NCCL_VERSION"}


def nccl_version() -> str | None:
    import torch

    try:
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - a CPU build of torch has no NCCL
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def collect(device: str) -> Environment:
    import torch  # the worker has torch loaded already; the console never calls this

    gpu_name = gpu_mem = driver = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        gpu_name, gpu_mem = props.name, props.total_memory / 2**20
        driver = _driver_version()
    return Environment(device=device, gpu_name=gpu_name, gpu_memory_mib=gpu_mem, driver=driver,
                       torch=torch.__version__, cuda=torch.version.cuda, python=platform.python_version(),
                       host=socket.gethostname(), cpu=platform.processor() or platform.machine(),
                       start=os.environ.get("PERFCONSOLE_START") or None, threads=torch.get_num_threads(),
                       nccl=nccl_version() if device == "cuda" else None, comm_env=comm_env())


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else v
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML missing or unusable: the driver is simply unknown
        return None

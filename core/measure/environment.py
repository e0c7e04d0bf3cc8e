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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Environment:
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


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
                       start=os.environ.get("PERFCONSOLE_START") or None, threads=torch.get_num_threads())


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

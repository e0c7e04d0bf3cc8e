"""How a test's rank script (run by torchrun) joins its job: NCCL on the GPU its LOCAL_RANK names, or gloo on the CPU."""
import os

import torch
import torch.distributed as dist


def join(cuda: bool) -> tuple[int, torch.device]:
    """(local rank, this rank's device), the default process group made."""
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return local, device

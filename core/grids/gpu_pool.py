"""Independent cells on several GPUs at once: one cell per GPU, each child seeing only its own GPU.

`run_on_gpus` hands the pending cells, in order, to whichever GPU is free first; each cell's child
runs with CUDA_VISIBLE_DEVICES set to that GPU's index (and CUDA_DEVICE_ORDER=PCI_BUS_ID, so CUDA
numbers the GPUs as NVML and nvidia-smi do), so its telemetry follows it too (core.launch.telemetry).
Results go into the cell's own slot of the record, so the order of the grid is the order of the
cells, whatever order they finish in. An OOM ends its cell alone; a cancel stops every running cell
and starts no more. Cells are not started ahead here: a cell's start-up overlaps other GPUs' cells,
which costs those only host CPU time (the start-up is imports, none of it on a GPU).
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable

CANCEL_POLL_S = 0.2


def gpu_env(gpu: str) -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": gpu, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def run_on_gpus(pending: list[int], gpus: list[str], run_cell: Callable[[int, str], None],
                cancelled: threading.Event) -> None:
    """Run `run_cell(index, gpu)` for every pending index, at most one per GPU at a time, in order of
    start. Returns when every started cell has ended (after a cancel: when the running ones have)."""
    free: queue.Queue[str] = queue.Queue()
    for g in gpus:
        free.put(g)
    threads: list[threading.Thread] = []
    errors: list[BaseException] = []

    def one(index: int, gpu: str) -> None:
        try:
            run_cell(index, gpu)
        except BaseException as exc:  # raised again on the caller's thread below
            errors.append(exc)
            cancelled.set()
        finally:
            free.put(gpu)

    try:
        for index in pending:
            gpu = None
            while gpu is None and not cancelled.is_set():
                try:
                    gpu = free.get(timeout=CANCEL_POLL_S)
                except queue.Empty:
                    pass
            if gpu is None or cancelled.is_set():
                break
            t = threading.Thread(target=one, args=(index, gpu), name=f"cell-{index}-gpu{gpu}", daemon=True)
            threads.append(t)
            t.start()
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]

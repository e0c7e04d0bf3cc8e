"""Measuring one run, inside the child process: build the model, warm up, time each phase with CUDA
events (a wall clock on the CPU), capture memory or a torch profile, and write the event stream.

`worker` is the child's entry point (`python -m perfconsole.core.measure.worker`); `bench` is the timed
loop and `pipeline` its steps' marks (a step in flight, or a synchronisation after each); `device_peaks`
the device's matmul and copy peaks; `converters` every optimization, registered under its setting's name and
applied in one loop, with the faster paths' code (bf16 weights, liger, float8) and AdamW's choice; `environment`
describes the machine; `memory_profile` the memory capture; `data_parallel` and `job` are one rank of
a data-parallel job (process group, DDP/FSDP, time in collectives, rank 0's view); `gc_control` sets Python's
garbage collector once a process's imports are done (a worker's, the warm process's, the console's).
May import: the shared vocabulary at core/'s top, core.profiling, core.telemetry, and perfconsole.model.
"""
from __future__ import annotations


class Unsupported(RuntimeError):
    """This spec cannot run on this machine; the message says why (and what to install, where that helps)."""

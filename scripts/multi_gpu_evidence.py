"""The multi-GPU evidence from saved snapshots: multi_gpu_evidence.py OUT_BASE DEVICE HOW --runs NAME=FILE...
[--independent NAME=JSON...] [--sweep concurrent=FILE serial=FILE] [--commands FILE]

Writes OUT_BASE.json and OUT_BASE.md: per data-parallel variant the median step, time in collectives
and its share of the step, the step without the all-reduce and the exposed communication, the NCCL
kernels' overlap with compute (where the run was profiled), and the weak-scaling efficiency against
the one-process run (each variant's own `--scaling` baseline where it has one, else the first baseline
of the same one-process program: same compile, weights and kernels, core.launch.scaling.SAME_PROGRAM); the change each setting bought against DDP's defaults; perfconsole's quiet step against an
independent DDP script of the same settings (scripts/independent_ddp.py, one JSON line each); and a
sweep's cells run concurrently on several GPUs against the same cells run one after the other.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from perfconsole.core import store
from perfconsole.core.launch.scaling import SAME_PROGRAM
from perfconsole.core.reports.parallel import overlap_share


def _med(xs):
    return statistics.median(xs) if xs else None


def program(spec) -> tuple:  # noqa: ANN001
    """What one process runs: a compiled job's baseline is the compiled one-process step."""
    return tuple(getattr(spec, f) for f in SAME_PROGRAM)


def variant_row(name: str, path: Path, baselines: dict[tuple, float]) -> dict:
    r = store.load(path)
    sm = r.summary
    single_ms = baselines.get(program(r.spec))
    if sm is not None and sm.single_process_ms:
        single_ms = sm.single_process_ms  # its own baseline: the same weights and kernels in one process
    row = {"variant": name, "file": str(path), "status": r.status, "label": r.name,
           "error": r.error.message if r.error else None}
    if sm is None:
        return row
    med = sm.total_ms.median
    nccl = None
    if r.overlap and r.profile is not None:  # NCCL kernel time in the capture, each kernel from its launch
        steps = (r.profile.overhead or {}).get("profiled_steps") or len(r.steps)
        rank0 = next((o for o in r.overlap if o.get("rank") == 0), {})
        if rank0.get("comm_kernel_ms") and steps:
            nccl = rank0["comm_kernel_ms"] / steps
    alone = r.collectives or {}  # the step's all-reduces with nothing beside them, and the link
    row.update(
        median_step_ms=med, world_size=sm.world_size,
        comm_ms=sm.comm_ms.median if sm.comm_ms else None, comm_share=sm.comm_share,
        nccl_kernel_ms_per_step_rank0=nccl, collectives_alone_ms=alone.get("alone_ms"),
        collectives_busbw_gbps=alone.get("busbw_gbps"), link_busbw_gbps=alone.get("link_busbw_gbps"),
        comm_timed_ms=sm.comm_timed_ms, comm_timer_cost=sm.comm_timer_cost,
        comm_free_ms=sm.comm_free_ms, exposed_comm_ms=sm.exposed_comm_ms, comm_hidden_share=sm.comm_hidden_share,
        nccl_overlap_share=overlap_share(r), slowest_rank=sm.slowest_rank,
        tokens_per_s=sm.tokens_per_s, mfu=sm.mfu, peak_allocated_mib=sm.peak_allocated_mib,
        single_process_ms=single_ms,
        scaling_efficiency=(single_ms / med) if single_ms and sm.world_size > 1 else None)
    return row


def sweep_rows(path: Path) -> dict:
    sw = store.load(path)
    cells = []
    for i, r in enumerate(sw.runs):
        gpu = sw.cell_gpus[i] if i < len(sw.cell_gpus) else None
        cells.append({"cell": r.name, "status": r.status, "gpu": gpu, "seconds": sw.cell_seconds[i],
                      "median_step_ms": r.summary.total_ms.median if r.summary else None})
    return {"file": str(path), "status": sw.status, "cells": cells}


def pct(v):
    return "-" if v is None else f"{v:.1%}"


def times(v):
    return "-" if v is None else f"{v:.3f}x"


def ms(v):
    return "-" if v is None else f"{v:,.1f}"


def markdown(doc: dict) -> str:
    out = [f"# Data parallel on {doc['device']}", "", f"Made by `{doc['how']}`.", ""]
    if doc.get("commands"):
        out += ["Commands:", "", "```", *doc["commands"], "```", ""]
    out += ["Weak-scaling efficiency is against the variant's own one-process program (the `--scaling` "
            "baseline: a compiled job's is the compiled one-process step), shown beside it.", "",
            "| variant | status | median step (ms) | comm (ms) | comm share | step w/o all-reduce (ms) | exposed comm (ms) "
            "| hidden | NCCL overlap | one process (ms) | weak-scaling eff. | tokens/s | MFU | peak alloc (MiB) |",
            "| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |"]
    for v in doc["variants"]:
        comm = v.get("comm_ms") if v.get("comm_ms") is not None else v.get("nccl_kernel_ms_per_step_rank0")
        mark = "" if v.get("comm_ms") is not None or comm is None else " (kernels)"
        out.append(f"| {v['variant']} | {v['status']} | {ms(v.get('median_step_ms'))} | {ms(comm)}{mark} | "
                   f"{pct(v.get('comm_share'))} | {ms(v.get('comm_free_ms'))} | {ms(v.get('exposed_comm_ms'))} | "
                   f"{pct(v.get('comm_hidden_share'))} | {pct(v.get('nccl_overlap_share'))} | "
                   f"{ms(v.get('single_process_ms'))} | {pct(v.get('scaling_efficiency'))} | {ms(v.get('tokens_per_s'))} | {pct(v.get('mfu'))} | "
                   f"{ms(v.get('peak_allocated_mib'))} |")
    if doc.get("bought"):
        out += ["", "What each setting bought against DDP's defaults (median step; efficiency points):", ""]
        out += [f"- {b['variant']}: {b['delta_ms']:+.1f} ms, {b['delta_efficiency_pts']:+.1f} points" for b in doc["bought"]]
    out += ["", "Definitions: comm = union of the gradient buckets' [ready, all-reduced] intervals per step (CUDA "
            "events around DDP's all-reduce hook), which overlaps the backward; step w/o all-reduce = the same "
            "step under DDP's no_sync, the job's slowest rank; exposed = median step - that; hidden = 1 - "
            "exposed / comm; NCCL overlap = share of NCCL kernel time during which another kernel ran on the "
            "same GPU (torch profiler trace, every rank); FSDP's comm column is its ranks-0 NCCL kernel time per "
            "profiled step, marked (kernels)."]
    if doc.get("independent"):
        out += ["", "perfconsole's quiet step against an independent DDP script of the same settings "
                "(scripts/independent_ddp.py: its own loop, CUDA events, slowest rank per step; same device call):", "",
                "| settings | perfconsole (ms) | independent (ms) | difference | gradients' all-reduce alone (ms) "
                "| its bus bandwidth (GB/s) | link bus bandwidth, 1 GiB (GB/s) |",
                "| --- | --: | --: | --: | --: | --: | --: |"]
        for i in doc["independent"]:
            ours = next((v.get("median_step_ms") for v in doc["variants"] if v["variant"] == i["variant"]), None)
            diff = f"{ours / i['median_step_ms'] - 1:+.1%}" if ours and i.get("median_step_ms") else "-"
            out.append(f"| {i['variant']} | {ms(ours)} | {ms(i.get('median_step_ms'))} | {diff} | "
                       f"{ms(i.get('grads_allreduce_ms'))} | {ms(i.get('grads_busbw_gbps'))} | "
                       f"{ms(i.get('link_busbw_gbps_1gib'))} |")
    out += ["", "| variant | collectives alone (ms/step) | their bus bandwidth (GB/s) | link bus bandwidth, 1 GiB "
            "(GB/s) | NCCL kernel time per step, rank 0, waits included (ms) | steps with the collectives timed (ms) "
            "| their cost against the quiet step |", "| --- | --: | --: | --: | --: | --: | --: |"]
    out += [f"| {v['variant']} | {ms(v.get('collectives_alone_ms'))} | {ms(v.get('collectives_busbw_gbps'))} | "
            f"{ms(v.get('link_busbw_gbps'))} | {ms(v.get('nccl_kernel_ms_per_step_rank0'))} | "
            f"{ms(v.get('comm_timed_ms'))} | {times(v.get('comm_timer_cost'))} |"
            for v in doc["variants"]]
    for name, sw in (doc.get("sweeps") or {}).items():
        total = sum(c["seconds"] or 0 for c in sw["cells"])
        out += ["", f"Sweep, {name}: {sw['status']}, wall {ms(sw.get('wall_s'))} s, sum of cell times {total:.1f} s",
                "", "| cell | status | GPU | cell seconds | median step (ms) |", "| --- | --- | --: | --: | --: |"]
        out += [f"| {c['cell']} | {c['status']} | {c['gpu'] or '-'} | {ms(c['seconds'])} | {ms(c['median_step_ms'])} |"
                for c in sw["cells"]]
    sweeps = list((doc.get("sweeps") or {}).values())
    if len(sweeps) == 2:  # per-cell agreement: the same cell on its own GPU beside others, and on GPU 0 alone
        alone = {c["cell"]: c.get("median_step_ms") for c in sweeps[1]["cells"]}
        out += ["", "| cell | median step, cells side by side (ms) | on GPU 0 alone (ms) | ratio |", "| --- | --: | --: | --: |"]
        for c in sweeps[0]["cells"]:
            a, b = c.get("median_step_ms"), alone.get(c["cell"])
            out.append(f"| {c['cell']} | {ms(a)} | {ms(b)} | {times(a / b) if a and b else '-'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out_base")
    p.add_argument("device")
    p.add_argument("how")
    p.add_argument("--runs", nargs="+", default=[], metavar="NAME=FILE")
    p.add_argument("--sweep", nargs="*", default=[], metavar="NAME=FILE[:WALL_S]")
    p.add_argument("--independent", nargs="*", default=[], metavar="VARIANT=JSON_LINE_FILE")
    p.add_argument("--commands", default=None, help="a file of the commands, one a line")
    a = p.parse_args(argv)
    runs = [(n, Path(f)) for n, f in (x.split("=", 1) for x in a.runs)]
    baselines: dict[tuple, float] = {}  # the first baseline of each one-process program
    for _, path in runs:
        if path.is_file():
            r = store.load(path)
            if r.summary is not None and r.summary.single_process_ms:
                baselines.setdefault(program(r.spec), r.summary.single_process_ms)
    variants = [variant_row(n, f, baselines) if f.is_file() else {"variant": n, "file": str(f), "status": "missing"}
                for n, f in runs]
    default = next((v for v in variants if v["variant"] == "ddp default" and v.get("median_step_ms")), None)
    bought = []
    if default is not None:
        for v in variants:
            if (v is not default and v.get("median_step_ms") and v.get("world_size", 1) > 1
                    and v.get("scaling_efficiency") is not None and default.get("scaling_efficiency") is not None):
                bought.append({"variant": v["variant"], "delta_ms": v["median_step_ms"] - default["median_step_ms"],
                               "delta_efficiency_pts": 100 * (v["scaling_efficiency"] - default["scaling_efficiency"])})
    sweeps = {}
    for item in a.sweep:
        name, rest = item.split("=", 1)
        path, _, wall = rest.partition(":")
        if Path(path).is_file():
            sweeps[name] = {**sweep_rows(Path(path)), "wall_s": float(wall) if wall else None}
    commands = Path(a.commands).read_text().splitlines() if a.commands and Path(a.commands).is_file() else []
    independent = []
    for item in a.independent:
        name, path = item.split("=", 1)
        lines = Path(path).read_text().splitlines() if Path(path).is_file() else []
        found = [json.loads(x) for x in lines if x.startswith("{")]
        independent.append({"variant": name, **(found[-1] if found else {"status": "missing"})})
    doc = {"device": a.device, "how": a.how, "variants": variants, "bought": bought,
           "independent": independent, "sweeps": sweeps, "commands": commands}
    Path(a.out_base + ".json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(a.out_base + ".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The data-parallel ladder at a glance: per rung, its one-process step beside the job's step as bars on one
scale, the job's bar split into the step without DDP's all-reduce (compute, and the communication the
backward hid) and the communication the step waited for (exposed).

FSDP has no step without its collectives, so its bar is not split: its time over the one-process step is
communication and sharding together (a sharded optimizer is faster than a whole one), and the line says so.
Plain text: the console draws it in a table cell, the Markdown export in a code block; `full` and `comm`
are the glyphs (block characters, or `#` and `=` in ASCII mode).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WIDTH = 40


@dataclass(frozen=True)
class ScalingBar:
    label: str                   # "1 ddp"
    one_ms: float | None         # the one-process program's median step
    job_ms: float | None         # the job's median step
    compute_ms: float | None     # the job's step without the all-reduce (DDP), or None
    exposed_ms: float | None     # job - compute, what the step waited for
    efficiency: float | None     # weak scaling: one / job
    nproc: int
    why_not: str | None = None   # the rung's status where it has no figures


def bars(rows: list[Any], nproc: int) -> list[ScalingBar]:
    """One bar pair per ladder row (core.reports.ladder.LadderRow) of a data-parallel ladder."""
    out = []
    for r in rows:
        compute = r.comm_free_ms if r.comm_free_ms is not None and r.median_ms is not None else None
        exposed = r.median_ms - compute if compute is not None else None  # type: ignore[operator]
        out.append(ScalingBar(f"{r.rung} {r.name}", r.single_process_ms, r.median_ms, compute, exposed,
                              r.scaling_efficiency, nproc, None if r.median_ms is not None else r.status))
    return out


def _bar(ms: float, scale: float, glyph: str) -> str:
    return glyph * max(1, round(ms * scale)) if ms > 0 else ""


def lines(items: list[ScalingBar], full: str = "█", comm: str = "▒", width: int = WIDTH) -> list[str]:
    """Two lines per rung (one GPU, then N), with a legend first; empty where no rung has figures."""
    top = max([v for b in items for v in (b.one_ms, b.job_ms) if v] or [0.0])
    if not top:
        return []
    scale, label_w, out = width / top, max(len(b.label) for b in items), [_legend(full, comm)]
    n = items[0].nproc
    for b in items:
        head = b.label.ljust(label_w)
        if b.job_ms is None:
            out.append(f"{head}  {b.why_not or 'no figures'}")
            continue
        one = ("1 GPU ".ljust(7) + _bar(b.one_ms, scale, full).ljust(width) + f"  {b.one_ms:,.1f} ms"
               if b.one_ms else "1 GPU ".ljust(7) + "(not measured)")
        job, note = _job_bar(b, scale, full, comm)
        eff = f" · weak scaling {b.efficiency:.1%}" if b.efficiency is not None else ""
        out.append(f"{head}  {one}")
        out.append(f"{' ' * label_w}  {f'{n} GPUs'.ljust(7)}{job.ljust(width)}  {b.job_ms:,.1f} ms · {note}{eff}")
    return out


def exposed_cell(ms: float | None) -> str:
    """A table's exposed-communication cell: '-' where not measured; where the step without the all-reduce was the
    slower one, nothing measurable was waited for: 'none', the difference beside it (core.reports.parallel's
    job line says the same in words)."""
    if ms is None:
        return "-"
    return f"none ({ms:,.2f})" if ms < 0 else f"{ms:,.2f}"


def _legend(full: str, comm: str) -> str:
    return (f"{full} compute (and the communication it hid)   {comm} communication the step waited for "
            "(step minus the step without DDP's all-reduce)")


def _job_bar(b: ScalingBar, scale: float, full: str, comm: str) -> tuple[str, str]:
    """A job's bar, split where the step without the all-reduce was measured, and what the line says of it."""
    if b.compute_ms is not None and b.exposed_ms is not None:
        said = (f"exposed: none measurable (the step without all-reduce {-b.exposed_ms:,.1f} ms slower)"
                if b.exposed_ms < 0 else f"exposed {b.exposed_ms:,.1f} ms")
        return _bar(b.compute_ms, scale, full) + _bar(max(b.exposed_ms, 0.0), scale, comm), said
    if b.nproc == 1:
        return _bar(b.job_ms, scale, full), "one process, no communication"  # type: ignore[arg-type]
    return (_bar(b.job_ms, scale, full),  # type: ignore[arg-type]
            "communication not separated (FSDP runs no step without its collectives)")


def count_lines(items: list[ScalingBar], efficiency: str = "weak scaling", full: str = "█", comm: str = "▒",
                width: int = WIDTH) -> list[str]:
    """A scaling curve's bars (core.reports.scale): one line per process count (`nproc` each its own), the
    step split into compute and the communication it waited for, on one scale; a legend first."""
    top = max([b.job_ms for b in items if b.job_ms] or [0.0])
    if not top:
        return []
    scale, label_w, out = width / top, max(len(b.label) for b in items), [_legend(full, comm)]
    for b in items:
        head = b.label.ljust(label_w)
        if b.job_ms is None:
            out.append(f"{head}  {b.why_not or 'no figures'}")
            continue
        bar, note = _job_bar(b, scale, full, comm)
        eff = f" · {efficiency} {b.efficiency:.1%}" if b.efficiency is not None else ""
        out.append(f"{head}  {bar.ljust(width)}  {b.job_ms:,.1f} ms · {note}{eff}")
    return out


def _f(v: float | None, digits: int = 2, k: float = 1.0) -> str:
    return "-" if v is None else f"{v * k:,.{digits}f}"


def markdown_lines(rows: list[Any], nproc: int) -> list[str]:
    """The data-parallel columns of a ladder's rows, then the bars in a code block."""
    out = ["", f"Data parallel over {nproc} processes (each with the batch: weak scaling against the same program "
               "in one process).", "",
           "| rung | 1 GPU (ms) | job (ms) | weak scaling (%) | comm (ms) | step without all-reduce (ms) | "
           "exposed comm (ms) | peak per GPU (GiB) | card (GiB) |",
           "| --- | --: | --: | --: | --: | --: | --: | --: | --: |"]
    for r in rows:
        out.append(f"| {r.rung} {r.name} | {_f(r.single_process_ms)} | {_f(r.median_ms)} | "
                   f"{_f(r.scaling_efficiency, 1, 100)} | {_f(r.comm_ms)} | {_f(r.comm_free_ms)} | "
                   f"{exposed_cell(r.exposed_comm_ms)} | {_f(r.peak_alloc_mib, 1, 1 / 1024)} | "
                   f"{_f(r.card_mib, 1, 1 / 1024)} |")
    drawn = lines(bars(rows, nproc))
    if drawn:
        out += ["", "```", *drawn, "```"]
    return out

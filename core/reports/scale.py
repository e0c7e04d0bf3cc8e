"""A scaling curve as a report: one row per process count with the per-rank batch, the median step and its
interval, the job's tokens/s, scaling efficiency (weak or strong, labelled), the communication the step waited
for (DDP: the step minus the step without the all-reduce), the collectives' time, their bus bandwidth alone
and the link's, and peak memory per GPU; below, a bar per count (core.reports.scaling_bars). As Markdown,
CSV and JSON.

Efficiency divides median steps: weak scaling (each rank has the batch) T_1 / T_N, strong scaling (the global
batch held, each of N ranks has batch / N) T_1 / (N * T_N); 1 is perfect in both.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from perfconsole.core.grids.scale import processes_text
from perfconsole.core.reports.scaling_bars import ScalingBar, count_lines, exposed_cell
from perfconsole.core.stats import MEDIAN_CI_MIN_N, interval_text

if TYPE_CHECKING:
    from perfconsole.core.grids.scale import ScaleRecord
    from perfconsole.core.record import RunRecord


@dataclass
class ScaleRow:
    processes: int
    per_rank_batch: int
    global_batch: int
    status: str                             # ok | oom | error | cancelled | pending
    reason: str | None = None
    added: bool = False                     # the one-process run the counts asked for left out
    median_ms: float | None = None
    interval_low_ms: float | None = None
    interval_high_ms: float | None = None
    tokens_per_s: float | None = None       # the job's: every rank's tokens
    efficiency: float | None = None         # weak: T_1 / T_N; strong: T_1 / (N * T_N)
    scaling: str = "weak"                   # weak | strong
    exposed_comm_ms: float | None = None    # DDP: median step - the step without the all-reduce
    comm_free_ms: float | None = None
    comm_ms: float | None = None            # median time with a collective in flight per step
    busbw_gbps: float | None = None         # the step's collectives alone (core.measure.collectives)
    link_busbw_gbps: float | None = None    # an all-reduce of the link's size alone
    peak_alloc_mib: float | None = None     # per GPU (each rank's is the same program's)
    card_mib: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def efficiency(one_ms: float, n: int, n_ms: float, strong: bool) -> float:
    return one_ms / (n * n_ms) if strong else one_ms / n_ms


def _row(n: int, r: RunRecord, batch: int, strong: bool, added: bool) -> ScaleRow:
    row = ScaleRow(n, batch, batch * n, r.status, added=added, scaling="strong" if strong else "weak",
                   reason=r.error.message if r.error and r.status != "ok" else None)
    s = r.summary
    if s is None or r.status != "ok":
        return row
    # The interval of the job's steps (each the slowest rank's), not between its ranks' medians: N ranks are too few.
    row.median_ms, row.tokens_per_s = s.total_ms.median, s.tokens_per_s
    row.interval_low_ms, row.interval_high_ms = s.total_ms.ci95_low, s.total_ms.ci95_high
    row.peak_alloc_mib, row.card_mib = s.peak_allocated_mib, r.environment.get("gpu_memory_mib")
    if n > 1:
        row.comm_ms = s.comm_ms.median if s.comm_ms is not None else None
        row.exposed_comm_ms, row.comm_free_ms = s.exposed_comm_ms, s.comm_free_ms
        c = r.collectives or {}
        row.busbw_gbps, row.link_busbw_gbps = c.get("busbw_gbps"), c.get("link_busbw_gbps")
    return row


def rows(scale: ScaleRecord) -> list[ScaleRow]:
    sp = scale.spec
    out = [_row(n, r, sp.batch_at(n), sp.strong, n == 1 and sp.added_one) for n, r in zip(sp.counts, scale.runs)]
    one = next((row.median_ms for row in out if row.processes == 1), None)
    for row in out:
        if one is not None and row.median_ms:
            row.efficiency = efficiency(one, row.processes, row.median_ms, sp.strong)
    return out


def bars(rs: list[ScaleRow]) -> list[ScalingBar]:
    out = []
    for r in rs:
        compute = r.comm_free_ms if r.exposed_comm_ms is not None else None
        out.append(ScalingBar(processes_text(r.processes), None, r.median_ms, compute, r.exposed_comm_ms,
                              r.efficiency, r.processes, None if r.median_ms is not None else status_text(r)))
    return out


def bar_lines(scale: ScaleRecord, full: str = "█", comm: str = "▒") -> list[str]:
    return count_lines(bars(rows(scale)), efficiency_label(scale), full=full, comm=comm)


def efficiency_label(scale: ScaleRecord) -> str:
    return "strong scaling" if scale.spec.strong else "weak scaling"


def status_text(row: ScaleRow) -> str:
    return row.status if not row.reason or row.status == "ok" else f"{row.status}: {row.reason}"


def _f(v: float | None, digits: int = 2, k: float = 1.0) -> str:
    return "-" if v is None else f"{v * k:,.{digits}f}"


def cells(row: ScaleRow) -> list[str]:
    """The table's cells after the count and the batch, as the CLI, the console and Markdown show them."""
    return [_f(row.median_ms), interval_text(row.interval_low_ms, row.interval_high_ms, ",.2f"),
            _f(row.tokens_per_s, 0), "-" if row.efficiency is None else f"{row.efficiency:.1%}",
            exposed_cell(row.exposed_comm_ms), _f(row.comm_ms), _f(row.busbw_gbps, 1), _f(row.link_busbw_gbps, 1),
            _f(row.peak_alloc_mib, 1, 1 / 1024) + ("" if row.card_mib is None else f" of {row.card_mib / 1024:,.1f}")]


def headers(scale: ScaleRecord) -> list[str]:
    return ["processes", "batch/rank", "status", "step (ms)", "interval (ms)", "tokens/s", efficiency_label(scale),
            "exposed comm (ms)", "comm (ms)", "busbw alone (GB/s)", "link busbw (GB/s)", "peak/GPU (GiB)"]


def count_text(row: ScaleRow) -> str:
    return f"{row.processes} (added)" if row.added else str(row.processes)


def notes(scale: ScaleRecord) -> list[str]:
    sp, b = scale.spec, scale.spec.base
    how = (f"strong scaling: the global batch {b.batch} held, each of N ranks has {b.batch}/N; "
           "efficiency = T_1 / (N x T_N)" if sp.strong else
           f"weak scaling: each rank has batch {b.batch}; efficiency = T_1 / T_N")
    out = [f"{b.parallel} over {','.join(map(str, sp.counts))} processes; count 1 is the one-process program "
           f"(no wrapper); {how}, T the median step"]
    if sp.added_one:
        out.append("the one-process run was added: --nproc left out 1, and every efficiency is against it")
    out.append("exposed comm: the median step minus the step without DDP's all-reduce ('-' for FSDP and one "
               "process; 'none' where the step without it was the slower one, the difference beside it); busbw "
               "alone: the step's collectives with nothing beside them; link: one all-reduce of the link's size")
    return out


def markdown(scale: ScaleRecord) -> str:
    b, env = scale.spec.base, scale.environment
    rs = rows(scale)
    lines = [f"# {scale.name}", "",
             f"- device: {env.get('gpu_name') or env.get('device') or b.device}; torch {env.get('torch', '?')}",
             f"- {b.model_label()}, ctx {b.ctx}, {b.precision}, {b.mode}; warm-up {b.warmup}, steps {b.steps}",
             f"- interval: 95%, of the median of the job's steps (order statistics); '-' with fewer than "
             f"{MEDIAN_CI_MIN_N} steps",
             *(f"- {n}" for n in notes(scale)), "",
             "| " + " | ".join(headers(scale)) + " |",
             "| " + " | ".join(["--:", "--:", "---"] + ["--:"] * 9) + " |"]
    for row in rs:
        lines.append("| " + " | ".join([count_text(row), str(row.per_rank_batch),
                                         status_text(row).replace("|", "/"), *cells(row)]) + " |")
    drawn = bar_lines(scale)
    if drawn:
        lines += ["", "```", *drawn, "```"]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = tuple(ScaleRow.__dataclass_fields__)


def csv_text(scale: ScaleRecord) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in rows(scale):
        d = row.to_dict()
        w.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
    return out.getvalue()


def json_text(scale: ScaleRecord) -> str:
    doc = {"kind": "scale", "id": scale.id, "name": scale.name, "created": scale.created, "status": scale.status,
           "spec": scale.spec.to_dict(), "environment": scale.environment,
           "counts": [row.to_dict() for row in rows(scale)]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"

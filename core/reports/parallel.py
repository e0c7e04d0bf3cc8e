"""A data-parallel job in words and rows: communication share, exposed communication, overlap, the
slowest rank, weak-scaling efficiency, and one row per rank. The CLI's caption, the Markdown report
and the console's Live pane all show these, so they say the same thing."""
from __future__ import annotations

import statistics
from typing import Any

from perfconsole.core.record import RunRecord


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f} ms"


def job_line(r: RunRecord) -> str | None:
    """One line for a job (None for a one-process run)."""
    if r.spec.nproc <= 1:
        return None
    s, sm = r.spec, r.summary
    knobs = [k for k, on in ((f"bucket {s.bucket_mb:g} MB" if s.bucket_mb else "", bool(s.bucket_mb)),
                             ("grad as bucket view", s.grad_as_bucket_view),
                             (f"{s.comm_hook} hook", s.comm_hook != "none"),
                             ("blocks kept gathered from forward to backward", not s.reshard),
                             ("bf16 gathers and reduce-scatters", s.fsdp_bf16),
                             ("compiled whole, no DDPOptimizer", s.optimize_ddp == "no_optimization"),
                             ("compiled autograd: the all-reduces in the backward's graph, not timed apart",
                              s.optimize_ddp == "python_reducer"),
                             ("ZeRO-1: AdamW's state sharded, each shard broadcast after the step", s.zero),
                             ("ZeRO-2: gradients reduce-scattered, AdamW on each rank's slice, parameters "
                              "all-gathered after the step", s.zero2)) if on]
    text = (f"{s.parallel} over {s.nproc} processes, global batch {s.nproc * s.batch}"
            + (f" ({', '.join(knobs)})" if knobs else ""))
    if sm is None:
        return text
    if sm.comm_ms is not None:
        text += f" · comm {_ms(sm.comm_ms.median)}/step ({_pct(sm.comm_share)} of the step"
        if sm.comm_timer_cost is not None:  # the collectives were timed in steps of their own
            text += f"; timing them made a step {sm.comm_timer_cost:.2f}x the quiet one"
        text += ")"
    if sm.exposed_comm_ms is not None and sm.exposed_comm_ms < 0:
        # The step without the all-reduce was the slower one: what the step waited for is below what its steps
        # vary by, so no exposed figure is given (the record keeps the difference).
        text += f" · exposed: none measurable (the step without all-reduce, {_ms(sm.comm_free_ms)}, was " \
                f"{_ms(-sm.exposed_comm_ms)} slower than the step)"
    elif sm.exposed_comm_ms is not None:
        text += f" · exposed {_ms(sm.exposed_comm_ms)} (step without all-reduce {_ms(sm.comm_free_ms)}; " \
                f"{_pct(sm.comm_hidden_share)} hidden)"
    alone = collectives_text(r.collectives)
    if alone:
        text += f" · {alone}"
        own = (r.collectives or {}).get("alone_ms")
        if own and sm.exposed_comm_ms is not None and sm.exposed_comm_ms >= 0:  # above 1: more than the transfer
            text += f" · exposed {sm.exposed_comm_ms / own:.2f}x the collectives alone"
    share = overlap_share(r)
    if share is not None:
        text += f" · NCCL kernels overlapping compute {share:.1%}"
    if sm.slowest_rank:
        worst = max(sm.slowest_rank.items(), key=lambda kv: kv[1])
        text += f" · slowest rank {worst[0]} in {worst[1]}/{sum(sm.slowest_rank.values())} steps"
    if sm.scaling_efficiency is not None:
        text += f" · weak-scaling efficiency {sm.scaling_efficiency:.1%}"
        if sm.scaling_efficiency_ci95:
            low, high = sm.scaling_efficiency_ci95
            text += f" [{low:.1%}, {high:.1%}] between ranks"
        text += f" (one process {_ms(sm.single_process_ms)})"
    elif r.baseline is not None:
        text += f" · one-process run: {r.baseline.get('status')}"
    return text


def collectives_text(c: dict[str, Any] | None) -> str | None:
    """"collectives alone 39.20 ms/step (433 all-reduces, 10.80 GB float32 at 347.6 GB/s bus bandwidth;
    the link 330.4 GB/s at 1 GiB)" (core.measure.collectives), or why they were not measured."""
    if not c:
        return None
    if c.get("alone_ms") is None:
        return f"collectives alone {c.get('error') or 'not measured'}"
    ops = ", ".join(f"{n} {kind.replace('_', '-')}{'s' * (n != 1)}" for kind, n in (c.get("ops") or {}).items())
    return (f"collectives alone {_ms(c['alone_ms'])}/step ({ops}, {_bytes(c['bytes'])} {c['dtype']} at "
            f"{c['busbw_gbps']:,.1f} GB/s bus bandwidth; the link {c['link_busbw_gbps']:,.1f} GB/s "
            f"at {_size(c['link_bytes'])})")


def _bytes(n: int) -> str:
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.2f} MB"


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 1 << 30 else f"{n / 2**20:g} MiB"


def overlap_share(r: RunRecord) -> float | None:
    """Communication kernel time overlapping compute, over every rank's profile (None without one)."""
    rows = [o for o in r.overlap or [] if o.get("comm_kernel_ms")]
    if not rows:
        return None
    return sum(o["overlapped_ms"] for o in rows) / sum(o["comm_kernel_ms"] for o in rows)


def rank_rows(r: RunRecord) -> list[dict[str, Any]]:
    """Per rank: median step, median comm, its comm share, steps in which it was the slowest, overlap."""
    slowest = (r.summary.slowest_rank if r.summary else None) or {}
    overlap = {o.get("rank"): o for o in r.overlap or []}
    rows = []
    for rank in r.ranks:
        steps = rank.steps
        med = statistics.median(s.total_ms for s in steps) if steps else None
        comms = [s.comm_ms for s in steps if s.comm_ms is not None]
        comm = statistics.median(comms) if comms else None
        o = overlap.get(rank.rank) or {}
        rows.append({"rank": rank.rank, "steps": len(steps), "median_ms": med, "comm_ms": comm,
                     "comm_share": comm / med if comm is not None and med else None,
                     "slowest_in": slowest.get(str(rank.rank), 0),
                     "last_ms": steps[-1].total_ms if steps else None,
                     "overlap_share": o.get("overlap_share")})
    return rows


def markdown_lines(r: RunRecord) -> list[str]:
    line = job_line(r)
    if line is None:
        return []
    out = ["", f"Data parallel: {line}.", "",
           "| rank | steps | median step (ms) | comm (ms) | comm share | slowest in | NCCL overlap |",
           "| --: | --: | --: | --: | --: | --: | --: |"]
    for row in rank_rows(r):
        out.append(f"| {row['rank']} | {row['steps']} | {_ms(row['median_ms'])[:-3]} | {_ms(row['comm_ms'])[:-3]} | "
                   f"{_pct(row['comm_share'])} | {row['slowest_in']} | {_pct(row['overlap_share'])} |")
    return out

"""A ladder as a report: one row per rung with its step time and interval, the changes of rungs left out that
it carries beyond the row above ("4 fused-adamw +compile"), speedups over the first and the previous rung,
MFU, fraction of speed of light, the GPU's busy share, the loss against the first rung's, and the kernel
categories that moved; as Markdown (like the hand-written reports), CSV and JSON.

Speedups divide median step times; the previous rung is the last one above with a time, and a line under the
table says which other rungs' changes a ratio over it includes. The interval, beside the median, is the
median's (core.stats.median_interval): between processes (of the processes' medians) with `--repeat` 2 or
more, else of the one process's steps, and the header says which, and that fewer than six have none.
Numerics: each of the first NUMERICS_STEPS steps' loss against the first rung's loss at the same
step index (the same data, seed and number of updates before it); the largest relative difference is
flagged past the precision's tolerance, unless the rung, or a rung below it whose change it carries,
changes rounding on purpose (bf16 weights, fp8: their names say so). Only the first steps: every step trains on the same batch, and once the model starts to
memorise it, rounding differences between two correct programs grow without bound (on an H200, 2.7B
bf16 naive against SDPA attention: 0.4% apart over steps 0-2, 18% by step 10).
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from perfconsole.core.flops import sol_fraction
from perfconsole.core.reports.profile import over_count
from perfconsole.core.record import RunRecord

from perfconsole.core.grids.ladder import rung as rung_named
from perfconsole.core.settings import RunSpec
from perfconsole.core.stats import MEDIAN_CI_MIN_N, interval_text, ratio_text
from perfconsole.core.run_summary import BUSY_SOURCES
from perfconsole.core.run_summary import busy_text as summary_busy_text
from perfconsole.core.profiling.loaded import loaded_of

if TYPE_CHECKING:
    from perfconsole.core.grids.ladder import LadderRecord, Rung

# Largest relative loss difference from the first rung that still counts as the same numerics.
LOSS_TOLERANCE = {"fp32": 1e-3, "bf16": 2e-2, "fp16": 2e-2}
NUMERICS_STEPS = 3
# A kernel category "moved" when its time per step changed by at least this many ms and this share of the step.
MOVED_MS, MOVED_SHARE = 0.05, 0.02


@dataclass
class LadderRow:
    rung: int                                   # 1-based position in the ladder
    name: str
    what: str
    status: str                                 # ok | oom | unsupported | error | cancelled | pending
    carries: list[str] = field(default_factory=list)   # rungs left out whose changes it has beyond the row above
    reason: str | None = None                   # why it did not run (unsupported, oom, error)
    median_ms: float | None = None
    interval_low_ms: float | None = None
    interval_high_ms: float | None = None
    processes: int = 0
    speedup_vs_first: float | None = None
    speedup_vs_previous: float | None = None
    previous_rung: int | None = None            # the rung speedup_vs_previous is over: the last one above with a time
    previous_spans: list[str] = field(default_factory=list)  # other rungs' changes that speedup includes
    mfu: float | None = None
    sol_fraction: float | None = None           # speed-of-light floor / measured median step
    floor_ms: float | None = None
    gpu_busy_share: float | None = None
    gpu_busy_source: str | None = None
    bound: str | None = None
    loss_max_rel_diff: float | None = None
    numerics: str | None = None                 # same | DIFFERS | differs by design
    category_ms: dict[str, float] = field(default_factory=dict)    # kernel ms per step by category
    over_count: tuple[float, float] | None = None   # (kernel ms, step ms) per profiled step, where the table over-counts
    moved: list[tuple[str, float]] = field(default_factory=list)    # (category, change in ms per step)
    # A data-parallel rung (core.reports.scaling_bars draws these): its one-process program's median step, weak
    # scaling (that over the job's median step), the collectives' time per step, the step without DDP's
    # all-reduce and what the step waited for (exposed), peak memory per GPU against the card's.
    single_process_ms: float | None = None
    scaling_efficiency: float | None = None
    comm_ms: float | None = None
    comm_free_ms: float | None = None
    exposed_comm_ms: float | None = None
    peak_alloc_mib: float | None = None
    card_mib: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "moved": [{"category": c, "delta_ms": d} for c, d in self.moved]}


def carries(spec: RunSpec, r: Rung) -> bool:
    """Whether the spec has the rung's change (every field it sets, as it sets it)."""
    return all(getattr(spec, k) == v for k, v in r.change.items())


def _losses(r: RunRecord) -> dict[int, float]:
    """The first process's losses by step index (warm-up included: its updates shape later steps)."""
    rep = r.replicates[0] if r.replicates else r
    return {s.index: s.loss for s in [*rep.warmup_steps, *rep.steps] if s.loss is not None}


def _category_ms(r: RunRecord) -> dict[str, float]:
    """Kernel ms per step by category, in the same step as the rung's median, so that one rung's categories
    minus the previous rung's add up to the change in median step.

    On CUDA the kernels are timed on the device, which the profiler does not slow: their time per profiled
    step. On the CPU the "kernels" are ops timed by the host clock: their self times make up the profiled steps,
    profiler and outliers included (a compiled CPU rung's first profiled step took 483 ms against 13 ms for the
    others, and its ops summed to 168 ms a step beside a 44 ms median). There the median step is divided among
    the categories by their share of the op time, so they add up to it."""
    if r.profile is None or not r.profile.tables:
        return {}
    overhead = r.profile.overhead or {}
    shares = loaded_of(r.profile).category_shares()
    if r.spec.device != "cuda" and r.summary is not None:
        return {c.category: c.share * r.summary.total_ms.median for c in shares}
    steps = overhead.get("profiled_steps") or r.spec.steps
    return {c.category: c.total_ns / steps / 1e6 for c in shares}


def rows(ladder: LadderRecord) -> list[LadderRow]:
    out: list[LadderRow] = []
    first: LadderRow | None = None
    previous: LadderRow | None = None
    first_losses: dict[int, float] = {}
    names = ladder.spec.names
    above: tuple[int, RunSpec] | None = None    # the row above's place and spec
    timed: RunSpec | None = None                # the spec of the last row with a time
    for rung, r in zip(ladder.rungs, ladder.runs):
        row = _row(names.index(rung.name), rung, r)
        row.carries = _carried(ladder.spec.all_rungs, row.rung - 1, r.spec, above)
        above = (row.rung - 1, r.spec)
        if row.median_ms is not None:
            if previous is not None and timed is not None:   # what the ratio over it includes beyond this rung
                row.previous_rung = previous.rung
                row.previous_spans = [o.name for o in ladder.spec.all_rungs[:row.rung - 1]
                                      if carries(r.spec, o) and not carries(timed, o)]
            timed = r.spec
            losses = _losses(r)
            if first is None:
                first, first_losses = row, losses
            # A run that carries a change rounding differently on purpose (its own or a rung's below it) differs by
            # design; read from its spec, so a ladder saved before a rung existed keeps its meaning.
            by_design = any(not other.same_numerics and carries(r.spec, other) for other in ladder.spec.all_rungs)
            _compare(row, first, previous, losses, first_losses, by_design, r.spec.precision)
            previous = row
        out.append(row)
    return out


def _carried(sequence: tuple[Rung, ...], i: int, spec: RunSpec, above: tuple[int, RunSpec] | None) -> list[str]:
    """The rungs between the row above and this one (rung i), left out of the ladder, whose changes this rung's
    spec has and the row above's has not; for the first row, those above the first rung, where every program starts."""
    start = above[0] + 1 if above else 1
    return [o.name for o in sequence[start:i] if carries(spec, o) and not (above and carries(above[1], o))]


def _row(i: int, rung: Rung, r: RunRecord) -> LadderRow:
    row = LadderRow(i + 1, rung.name, rung.what, r.status,
                    reason=r.error.message if r.error and r.status != "ok" else None)
    s = r.summary
    if s is None or r.status != "ok":
        return row
    interval = s.interval_stat("total_ms")
    row.median_ms = s.total_ms.median
    row.interval_low_ms, row.interval_high_ms = interval.ci95_low, interval.ci95_high
    row.processes = s.processes
    row.mfu = s.mfu
    sol = (s.speed_of_light or {}).get("total_ms") or {}
    row.sol_fraction, row.floor_ms = sol_fraction(s.speed_of_light), sol.get("floor_ms")
    row.gpu_busy_share, row.gpu_busy_source, row.bound = s.gpu_busy_share, s.gpu_busy_source, s.bound
    row.category_ms = _category_ms(r)
    row.over_count = over_count(r.profile.overhead if r.profile else None)
    row.peak_alloc_mib, row.card_mib = s.peak_allocated_mib, r.environment.get("gpu_memory_mib")
    if r.spec.nproc > 1:
        row.single_process_ms, row.scaling_efficiency = s.single_process_ms, s.scaling_efficiency
        row.comm_ms = s.comm_ms.median if s.comm_ms is not None else None
        row.comm_free_ms, row.exposed_comm_ms = s.comm_free_ms, s.exposed_comm_ms
    return row


def _compare(row: LadderRow, first: LadderRow, previous: LadderRow | None, losses: dict[int, float],
             first_losses: dict[int, float], by_design: bool, precision: str) -> None:
    row.speedup_vs_first = first.median_ms / row.median_ms  # type: ignore[operator]
    if previous is not None:
        row.speedup_vs_previous = previous.median_ms / row.median_ms  # type: ignore[operator]
        if row.category_ms and previous.category_ms:
            step = previous.median_ms or 0.0
            deltas = [(c, row.category_ms.get(c, 0.0) - previous.category_ms.get(c, 0.0))
                      for c in sorted(set(row.category_ms) | set(previous.category_ms))]
            row.moved = sorted(((c, d) for c, d in deltas if abs(d) >= max(MOVED_MS, MOVED_SHARE * step)),
                               key=lambda cd: -abs(cd[1]))
    common = [k for k in losses if k < NUMERICS_STEPS and k in first_losses and first_losses[k] != 0]
    if common:
        row.loss_max_rel_diff = max(abs(losses[k] - first_losses[k]) / abs(first_losses[k]) for k in common)
        if by_design:
            row.numerics = "differs by design"
        else:
            ok = row.loss_max_rel_diff <= LOSS_TOLERANCE.get(precision, 2e-2)
            row.numerics = "same" if ok else "DIFFERS"


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _g(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def speedup_cells(row: LadderRow) -> tuple[str, str]:
    """The rung's speedups over the first and the previous rung as a table says them ("1.25x", "2.44x slower")."""
    return ratio_text(row.speedup_vs_first, faster=False), ratio_text(row.speedup_vs_previous, faster=False)


def rung_text(row: LadderRow) -> str:
    """"4 fused-adamw +compile": the rung, then each rung left out whose change it has beyond the row above."""
    return " ".join([f"{row.rung} {row.name}", *(f"+{name}" for name in row.carries)])


def carry_notes(rs: list[LadderRow]) -> list[str]:
    """What a "+name" in a rung means, and each ratio over the previous rung that includes other rungs' changes."""
    out = ["+name after a rung: a rung left out, whose change it carries too"] if any(r.carries for r in rs) else []
    by_rung = {r.rung: r for r in rs}
    for r in rs:
        if r.previous_spans and r.previous_rung in by_rung:
            over = by_rung[r.previous_rung]
            changes = " and ".join(f"{name}'s" for name in r.previous_spans)
            out.append(f"{r.rung} {r.name}'s vs prev is over {over.rung} {over.name}, so it includes {changes} "
                       f"change{'s' if len(r.previous_spans) > 1 else ''} too")
    return out


def moved_text(row: LadderRow, limit: int = 3) -> str:
    return ", ".join(f"{c} {d:+.2f}" for c, d in row.moved[:limit]) or "-"


def status_text(row: LadderRow) -> str:
    if row.status == "ok":
        return "ok"
    return f"{row.status}: {row.reason}" if row.reason and not row.reason.startswith(row.status) else (
        row.reason or row.status)


def busy_text(row: LadderRow) -> str:
    """">= 4.5% events host-bound", "91.2% nvml gpu-bound": the figure, where it came from, what it makes the step."""
    return summary_busy_text(row.gpu_busy_share, row.gpu_busy_source, row.bound, digits=1)


def busy_legend(rs: list[LadderRow]) -> str | None:
    """What the GPU busy column's sources are, for the ones the rows use."""
    used = [s for s in BUSY_SOURCES if any(r.gpu_busy_source == s for r in rs)]
    return "GPU busy: " + "; ".join(f"{s}: {BUSY_SOURCES[s]}" for s in used) if used else None


MD_COLUMNS = ("rung", "change", "status", "median step (ms)", "interval (ms)", "vs first (x)",
              "vs previous (x)", "MFU (%)", "speed of light (%)", "GPU busy (%)", "loss vs first (rel)",
              "kernel categories moved (ms/step)")


def markdown(ladder: LadderRecord) -> str:
    b = ladder.spec.base
    env = ladder.environment
    rs = rows(ladder)
    reps = b.repeat
    of = "the processes' medians" if reps > 1 else "the steps of one process"
    lines = [f"# {ladder.name}", "",
             f"- device: {env.get('gpu_name') or env.get('device') or b.device}; torch {env.get('torch', '?')}",
             f"- {b.size}, ctx {b.ctx}, batch {b.batch}, {b.precision}, train; warm-up {b.warmup}, steps {b.steps}, "
             f"processes per rung {reps}",
             f"- interval: 95%, of the median of {of} (order statistics); '-' with fewer than {MEDIAN_CI_MIN_N} "
             f"{'processes' if reps > 1 else 'steps'}, too few for one",
             "- speed of light: the step's matmul FLOPs at the measured matmul peak plus AdamW's bytes at the "
             "measured copy bandwidth, over the median step", ""]
    sol = next(((r.summary.speed_of_light or {}).get("peaks") for r in ladder.runs if r.summary), None)
    if sol:
        lines[-1:-1] = [f"- peaks: {_g(sol['matmul_tflops'])} TFLOP/s {sol['precision']} ({sol['matmul_source']}), "
                        f"{_g(sol['bandwidth_gbps'])} GB/s ({sol['bandwidth_source']})"]
    machines = ladder.machines()
    if len(machines) > 1:  # a ladder resumed elsewhere: its rungs are not all from one machine
        lines[-1:-1] = ["- rungs ran on more than one machine: " + "; ".join(
            f"{where}: {', '.join(names)}" for where, names in machines)]
    last = ladder.runs[-1].spec
    names = ladder.spec.names
    skipped = [n for n in names[:names.index(ladder.spec.rungs_in_order()[-1])]
               if n not in ladder.spec.rungs and (n == names[0] or carries(last, rung_named(n, b)))]
    if skipped:
        lines[-1:-1] = [f"- rungs left out (their changes still carried up): {', '.join(skipped)}"]
    # Read from the runs' specs: a ladder saved before such changes stayed on their rung carried them up.
    placed = [(names.index(name), run.spec) for name, run in zip(ladder.spec.rungs_in_order(), ladder.runs)]
    kept = [(name, why) for name, why in ladder.spec.not_carried()
            if (above := [spec for i, spec in placed if i > names.index(name)])
            and not any(carries(spec, rung_named(name, b)) for spec in above)]
    if kept:
        lines[-1:-1] = [f"- not carried up on {b.device} {b.precision}: " + ", ".join(
            f"{name} ({why})" for name, why in kept)]
    legend = busy_legend(rs)
    if legend:
        lines[-1:-1] = [f"- {legend}"]
    lines[-1:-1] = [f"- {note}" for note in carry_notes(rs)]
    lines += ["| " + " | ".join(MD_COLUMNS) + " |", "| " + " | ".join(["---"] * 3 + ["--:"] * 8 + ["---"]) + " |"]
    for row in rs:
        interval = interval_text(row.interval_low_ms, row.interval_high_ms, ",.2f")
        loss = "-" if row.loss_max_rel_diff is None else f"{row.loss_max_rel_diff:.1e} {row.numerics}"
        lines.append("| " + " | ".join([
            rung_text(row), row.what, status_text(row).replace("|", "/"), _f(row.median_ms), interval,
            *speedup_cells(row),
            _f(None if row.mfu is None else 100 * row.mfu, 1), _f(None if row.sol_fraction is None else 100 * row.sol_fraction, 1),
            busy_text(row), loss, moved_text(row)]) + " |")
    if b.nproc > 1:
        from perfconsole.core.reports.scaling_bars import markdown_lines

        lines += markdown_lines(rs, b.nproc)
    found = verdicts(rs, bold=True)
    if found.over_counted:
        lines += ["", *(f"- {line}" for line in found.over_counted)]
    for line in found.best:
        lines += ["", line]
    return "\n".join(lines) + "\n"


@dataclass
class Verdicts:
    """What the rows add up to, in sentences: the rungs whose profile counted kernels twice, and the best rung
    (with, when it rounds differently on purpose, the best one with the first rung's numerics)."""
    over_counted: list[str] = field(default_factory=list)
    best: list[str] = field(default_factory=list)


def verdicts(rs: list[LadderRow], bold: bool = False) -> Verdicts:
    out = Verdicts()
    for row in rs:
        if row.over_count:
            out.over_counted.append(
                f"rung {row.rung} {row.name}: its kernels sum to {row.over_count[0]:,.2f} ms per profiled step, more "
                f"than the {row.over_count[1]:,.2f} ms step: the profiler counted some kernels more than once, so its "
                "categories are not vouched for.")
    # A rung whose loss left the first rung's is a faster wrong program, not a speed-up: never the best. A rung
    # that rounds differently on purpose can be; then the best with the first rung's numerics is named too.
    best = _fastest(rs, lambda r: r.numerics != "DIFFERS")
    if best is not None:
        out.best.append(f"Best rung: {_best_text(best, bold)}.")
        if best.numerics == "differs by design":
            same = _fastest(rs, lambda r: r.numerics in ("same", None))
            if same is not None:
                out.best.append(f"Best rung with the first rung's numerics: {_best_text(same, bold)}.")
    return out


def _fastest(rs: list[LadderRow], keep: Any) -> LadderRow | None:
    return min((r for r in rs if r.median_ms is not None and keep(r)), key=lambda r: r.median_ms,  # type: ignore[arg-type, return-value]
               default=None)


def _best_text(row: LadderRow, bold: bool) -> str:
    sol = f", {_pct(row.sol_fraction)} of speed of light" if row.sol_fraction else ""
    design = "; it rounds differently on purpose" if row.numerics == "differs by design" else ""
    mark = "**" if bold else ""
    return (f"{mark}{row.rung} {row.name}{mark}, {_f(row.median_ms)} ms ({ratio_text(row.speedup_vs_first, faster=False)} "
            f"the first rung{sol}{design})")


CSV_COLUMNS = ("rung", "name", "status", "reason", "carries", "median_ms", "interval_low_ms", "interval_high_ms",
               "processes", "speedup_vs_first", "speedup_vs_previous", "previous_rung", "previous_spans", "mfu",
               "sol_fraction", "floor_ms", "gpu_busy_share", "gpu_busy_source", "bound", "loss_max_rel_diff", "numerics",
               "moved", "single_process_ms", "scaling_efficiency", "comm_ms", "comm_free_ms", "exposed_comm_ms",
               "peak_alloc_mib", "card_mib")


def csv_text(ladder: LadderRecord) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in rows(ladder):
        d = row.to_dict()
        d["moved"] = moved_text(row, limit=20)
        d["carries"], d["previous_spans"] = ", ".join(row.carries), ", ".join(row.previous_spans)
        w.writerow(["" if d[c] is None else d[c] for c in CSV_COLUMNS])
    return out.getvalue()


def json_text(ladder: LadderRecord) -> str:
    doc = {"kind": "ladder", "id": ladder.id, "name": ladder.name, "created": ladder.created,
           "status": ladder.status, "spec": ladder.spec.to_dict(), "environment": ladder.environment,
           "rungs": [row.to_dict() for row in rows(ladder)]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"

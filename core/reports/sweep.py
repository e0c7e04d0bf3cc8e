"""A sweep as a report: Markdown tables like the hand-written ones, CSV rows, and `{"runs": [...]}` JSON.

Findings are computed, not written: backward / forward ratio, bf16 speedup per size, the context
where OOM starts, first-step cost in a warm-up study, and the top kernel and matmul share of
profiled cells.
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perfconsole.core.record import Profile, RunRecord
from perfconsole.core.reports.run import run_document
from perfconsole.core.stats import ratio_text

if TYPE_CHECKING:
    from perfconsole.core.grids.sweep import SweepRecord

STATUS_TEXT = {"ok": "ok", "oom": "**OOM**", "pending": "not run", "cancelled": "cancelled", "error": "error"}
LOW_PRECISIONS = ("bf16", "fp16")
# What a cell of a grid shows; every record status falls into one of these.
GRID_STATUSES = ("ok", "oom", "error", "cancelled", "not_run")
SWEEP_METRICS = {"step_ms": "mean step time (ms)", "tokens_per_s": "tokens/s", "peak_mib": "peak allocated (MiB)"}


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _mean(st) -> float | None:
    return None if st is None else st.mean


def _std(st) -> float | None:
    return None if st is None else st.std


def first_step_ms(r: RunRecord) -> float | None:
    """The first step the process ran: a warm-up step, or the first measured one with no warm-up."""
    steps = r.warmup_steps or r.steps
    return steps[0].total_ms if steps else None


def cell_document(r: RunRecord) -> dict[str, Any]:
    doc = run_document(r)
    # run_document folds every unfinished state into "error"; in a grid "not run" and "cancelled" differ.
    doc["status"] = {"ok": "ok", "oom": "oom", "imported": "ok", "pending": "not_run",
                     "cancelled": "cancelled"}.get(r.status, "error")
    sm = r.summary
    doc["forward_ms"] = _mean(sm.forward_ms) if sm else None
    doc["backward_ms"] = _mean(sm.backward_ms) if sm else None
    doc["total_ms"] = sm.total_ms.mean if sm else None
    doc["first_step_ms"] = first_step_ms(r)
    return doc


def json_text(sw: SweepRecord) -> str:
    doc = {"kind": "sweep", "id": sw.id, "name": sw.name, "created": sw.created, "status": sw.status,
           "spec": sw.spec.to_dict(), "environment": sw.environment, "counts": sw.counts(),
           "runs": [cell_document(r) for r in sw.runs]}
    return json.dumps(doc, indent=2, allow_nan=False, default=_no_nan) + "\n"


def _no_nan(o: Any) -> Any:
    raise TypeError(f"cannot write {type(o).__name__}")


CSV_COLUMNS = ("size", "d_model", "d_ff", "n_layers", "n_heads", "ctx", "batch", "precision", "mode",
               "warmup", "steps", "status", "forward_mean_ms", "forward_std_ms", "backward_mean_ms",
               "backward_std_ms", "optimizer_mean_ms", "total_mean_ms", "total_std_ms", "first_step_ms",
               "tokens_per_s", "peak_allocated_mib", "error")


def csv_text(sw: SweepRecord) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in sw.runs:
        s, sm = r.spec, r.summary
        dims = [d or "" for d in s.dims()]  # 0: the spec does not say (a factory's model)
        num = [_mean(sm.forward_ms), _std(sm.forward_ms), _mean(sm.backward_ms), _std(sm.backward_ms),
               _mean(sm.optimizer_ms), sm.total_ms.mean, sm.total_ms.std] if sm else [None] * 7
        w.writerow([s.model_label(), *dims, s.ctx, s.batch, s.precision, s.mode, s.warmup,
                    s.steps, r.status, *("" if v is None else v for v in num),
                    "" if first_step_ms(r) is None else first_step_ms(r),
                    sm.tokens_per_s if sm else "", _peak(r) if _peak(r) is not None else "",
                    r.error.message if r.error else ""])
    return out.getvalue()


def _peak(r: RunRecord) -> float | None:
    if r.summary and r.summary.peak_allocated_mib is not None:
        return r.summary.peak_allocated_mib
    return r.memory.peak_allocated_mib if r.memory else None


# --- Markdown ----------------------------------------------------------------------------------

def _grid_table(runs: list[RunRecord], show_warmup: bool) -> list[str]:
    has_opt = any(r.spec.mode == "train" for r in runs)
    head = ["size", "d_model", "d_ff", "layers", "heads", "ctx"] + (["warm-up"] if show_warmup else []) + [
        "status", "fwd mean (ms)", "fwd std (ms)", "bwd mean (ms)", "bwd std (ms)"] + (
        ["opt mean (ms)"] if has_opt else []) + ["total (ms)", "tokens/s", "peak alloc (MiB)"]
    align = ["---", "--:", "--:", "--:", "--:", "--:"] + (["--:"] if show_warmup else []) + ["---"] + [
        "--:"] * (len(head) - 7 - show_warmup)
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    for r in runs:
        s, sm = r.spec, r.summary
        cells = [s.model_label(), *(str(d) if d else "-" for d in s.dims()), str(s.ctx)]  # "-": a factory's
        cells += [str(s.warmup)] if show_warmup else []
        cells.append(STATUS_TEXT.get(r.status, r.status))
        if sm is not None and r.status == "ok":
            cells += [_f(_mean(sm.forward_ms)), _f(_std(sm.forward_ms)), _f(_mean(sm.backward_ms)),
                      _f(_std(sm.backward_ms))] + ([_f(_mean(sm.optimizer_ms))] if has_opt else []) + [
                f"**{_f(sm.total_ms.mean)}**", f"{sm.tokens_per_s:,.0f}", _f(_peak(r), 0)]
        else:
            cells += ["-"] * (len(head) - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _speedups(sw: SweepRecord) -> list[tuple[str, int, str, str, float, float]]:
    """(size, ctx, mode, low precision, fp32 ms, low ms) where the same cell ran ok in both."""
    sp = sw.spec
    by = {(r.spec.size, r.spec.ctx, r.spec.mode + sp.extra_words(sp.column_of(r.spec)[2]), r.spec.warmup,
           r.spec.precision): r for r in sw.runs if r.status == "ok" and r.summary}
    out = []
    for (size, ctx, mode, warmup, prec), r in by.items():
        base = by.get((size, ctx, mode, warmup, "fp32"))
        if prec in LOW_PRECISIONS and base is not None:
            out.append((size, ctx, mode, prec, base.summary.total_ms.mean, r.summary.total_ms.mean))
    return out


def _oom_starts(sw: SweepRecord) -> list[str]:
    found = []
    groups: dict[tuple[str, str, str], list[RunRecord]] = defaultdict(list)
    for r in sw.runs:
        groups[(r.spec.size, r.spec.precision, r.spec.mode + sw.spec.extra_words(sw.spec.column_of(r.spec)[2]))].append(r)
    for (size, prec, mode), runs in groups.items():
        ooms = sorted(r.spec.ctx for r in runs if r.status == "oom")
        if ooms:
            found.append(f"{size} {prec} {mode} from ctx {ooms[0]}")
    return found


def kernel_findings(profile: Profile | None) -> str | None:
    """Top kernel and matmul share of GPU (or CPU op) time, from whichever kernel table the run has."""
    if profile is None:
        return None
    table = next((rows for name, rows in profile.tables.items() if "kern" in name and rows), None)
    if not table:
        return None
    time_key = next((k for k in table[0] if k.startswith("total") and k.endswith("_ns")), None)
    if time_key is None or "name" not in table[0]:
        return None
    total = sum(float(row.get(time_key) or 0) for row in table)
    if total <= 0:
        return None
    top = max(table, key=lambda row: float(row.get(time_key) or 0))
    matmul = sum(float(row.get(time_key) or 0) for row in table if _category(str(row["name"])) == "matmul")
    name = str(top["name"])
    name = name if len(name) <= 70 else name[:67] + "..."
    return (f"top kernel `{name}` {float(top[time_key]) / total:.1%} of kernel time; "
            f"matmul {matmul / total:.1%}")


def _category(name: str) -> str:
    from perfconsole.core.profiling.categories import categorize

    return categorize(name)


def findings(sw: SweepRecord) -> list[str]:
    out = []
    ok = [r for r in sw.runs if r.status == "ok" and r.summary]
    ratios = [r.summary.backward_ms.mean / r.summary.forward_ms.mean for r in ok
              if r.summary.backward_ms and r.summary.forward_ms]
    if ratios:
        out.append(f"backward / forward: {sum(ratios) / len(ratios):.2f} on average "
                   f"({min(ratios):.2f} – {max(ratios):.2f}) over {len(ratios)} cells")
    sp = _speedups(sw)
    if sp:
        per: dict[tuple[str, str], list[float]] = defaultdict(list)
        for size, _ctx, _mode, prec, base, low in sp:
            per[(size, prec)].append(base / low)
        parts = [f"{size} {ratio_text(math.exp(sum(map(math.log, v)) / len(v)), faster=False)}"
                 for (size, prec), v in per.items()]
        precs = sorted({prec for _, prec in per})
        out.append(f"{'/'.join(precs)} speedup over fp32 per size (geometric mean over contexts): " + ", ".join(parts))
        for size, prec in per:
            fp32_ooms = {r.spec.ctx for r in sw.runs if r.spec.size == size and r.spec.precision == "fp32"
                         and r.status == "oom"}
            rescued = sorted(c for c in fp32_ooms if any(
                r.spec.size == size and r.spec.precision == prec and r.spec.ctx == c and r.status == "ok"
                for r in sw.runs))
            if rescued:
                out.append(f"{size} fits in {prec} at ctx {', '.join(map(str, rescued))} where fp32 runs out of memory")
    starts = _oom_starts(sw)
    out.append("OOM starts: " + "; ".join(starts) if starts else "no cell ran out of memory")
    if sw.spec.is_warmup_study:
        out += _warmup_findings(sw)
    for r in ok:
        k = kernel_findings(r.profile)
        if k:
            out.append(f"{r.spec.label()}: {k}")
    other = [r for r in sw.runs if r.status == "error"]
    if other:
        out.append(f"{len(other)} cells failed: " + "; ".join(
            f"{r.spec.label()}: {r.error.message if r.error else 'error'}" for r in other[:3]))
    return out


def _warmup_findings(sw: SweepRecord) -> list[str]:
    cv: dict[int, list[float]] = defaultdict(list)
    first: dict[int, list[float]] = defaultdict(list)
    for r in sw.runs:
        if r.status == "ok" and r.summary and r.summary.total_ms.mean > 0:
            t = r.summary.total_ms
            cv[r.spec.warmup].append(t.std / t.mean)
            if first_step_ms(r) is not None:
                first[r.spec.warmup].append(first_step_ms(r) / t.median)
    if not cv:
        return []
    parts = [f"{w} warm-up: std/mean {sum(v) / len(v):.1%}" for w, v in sorted(cv.items())]
    lines = ["measured-step variability by warm-up steps: " + ", ".join(parts)]
    if first:
        worst = max(x for v in first.values() for x in v)
        lines.append(f"the first step of a process costs up to {worst:.1f}x the steady-state median")
    return lines


def _warmup_table(sw: SweepRecord) -> list[str]:
    lines = ["| size | ctx | precision | mode | warm-up | first step (ms) | measured mean (ms) | "
             "measured std (ms) | std / mean | first / median |",
             "| --- | --: | --- | --- | --: | --: | --: | --: | --: | --: |"]
    for r in sw.runs:
        s, sm = r.spec, r.summary
        if r.status != "ok" or sm is None:
            lines.append(f"| {s.model_label()} | {s.ctx} | {s.precision} | {s.mode} | {s.warmup} | "
                         f"{STATUS_TEXT.get(r.status, r.status)} | - | - | - | - |")
            continue
        t, fs = sm.total_ms, first_step_ms(r)
        lines.append(f"| {s.model_label()} | {s.ctx} | {s.precision} | {s.mode} | {s.warmup} | {_f(fs)} | {_f(t.mean)} | "
                     f"{_f(t.std)} | {t.std / t.mean:.1%} | {_f(fs / t.median if fs else None)}x |")
    return lines


def markdown(sw: SweepRecord) -> str:
    sp, env = sw.spec, sw.environment
    b = sp.base
    counts = ", ".join(f"{n} {STATUS_TEXT.get(k, k).strip('*')}" for k, n in sw.counts().items())
    lines = [f"# {sw.name}", "",
             f"- status: **{sw.status}** ({counts})",
             f"- device: {env.get('gpu_name') or env.get('cpu') or b.device}; torch {env.get('torch', '?')}, "
             f"CUDA {env.get('cuda') or '-'}",
             f"- batch {b.batch}, {', '.join(map(str, sp.warmups))} warm-up + {b.steps} measured steps, "
             f"attention {b.attention}{', compiled' if b.compile else ''}{', TF32' if b.tf32 else ''}; "
             "one process per cell", ""]
    show_warmup = sp.is_warmup_study
    for prec, mode, extra in sp.columns():
        runs = [r for r in sw.runs if sp.column_of(r.spec) == (prec, mode, extra)]
        lines += [f"## {mode} · {prec}{sp.extra_words(extra)}", ""] + _grid_table(runs, show_warmup) + [""]
    sps = _speedups(sw)
    if sps:
        lines += ["## Lower precision against fp32", "",
                  "| size | ctx | mode | precision | fp32 total (ms) | total (ms) | speedup |",
                  "| --- | --: | --- | --- | --: | --: | --: |"]
        lines += [f"| {size} | {ctx} | {mode} | {prec} | {_f(base)} | {_f(low)} | **{ratio_text(base / low, faster=False)}** |"
                  for size, ctx, mode, prec, base, low in sps] + [""]
    if show_warmup:
        lines += ["## Warm-up study", ""] + _warmup_table(sw) + [""]
    lines += ["## Findings", ""] + [f"- {f}" for f in findings(sw)]
    return "\n".join(lines) + "\n"


# --- grids for a viewer ------------------------------------------------------------------------

@dataclass(frozen=True)
class GridCell:
    """One cell of a grid: its status and the values of the metric shown (None where not measured)."""
    status: str                          # one of GRID_STATUSES
    values: tuple[float | None, ...]
    error: str | None = None


@dataclass(frozen=True)
class GridTable:
    """One table of a grid: `rows` x `cols` cells, labelled by what the rows and columns are."""
    title: str
    row_name: str
    col_name: str
    rows: tuple[Any, ...]
    cols: tuple[Any, ...]
    cells: tuple[tuple[GridCell, ...], ...]

    def cell(self, row: Any, col: Any) -> GridCell:
        return self.cells[self.rows.index(row)][self.cols.index(col)]


def grid_status(status: str) -> str:
    """A record's status as a grid cell shows it: cells not started are "not run", the one under way
    "running", a ladder rung that cannot run here "unsupported"; only a cell that failed is an error."""
    return {"ok": "ok", "imported": "ok", "oom": "oom", "cancelled": "cancelled", "pending": "not_run",
            "running": "running", "unsupported": "unsupported"}.get(status, "error")


def _sweep_value(r: RunRecord, metric: str) -> float | None:
    # A cell that did not finish shows its status only: its few steps would read as a result.
    if r.status not in ("ok", "imported"):
        return None
    if metric == "peak_mib":
        return _peak(r)
    sm = r.summary
    if sm is None:
        return None
    return sm.total_ms.mean if metric == "step_ms" else sm.tokens_per_s


def grid_tables(sw: SweepRecord, metric: str = "step_ms") -> list[GridTable]:
    """One table per (mode, precision[, warm-up]): sizes as rows, contexts as columns, one value per cell."""
    if metric not in SWEEP_METRICS:
        raise ValueError(f"metric: must be one of {', '.join(SWEEP_METRICS)}, not {metric!r}")
    sp = sw.spec
    ctxs = tuple(sorted(sp.ctxs))
    by = {(sp.column_of(r.spec), r.spec.warmup, r.spec.size, r.spec.ctx): r for r in sw.runs}
    out = []
    for prec, mode, extra in sp.columns():
        for warmup in sp.warmups:
            title = f"{mode} · {prec}{sp.extra_words(extra)}" + (f" · warm-up {warmup}" if sp.is_warmup_study else "")
            rows = []
            for size in sp.sizes:
                row = []
                for ctx in ctxs:
                    r = by.get(((prec, mode, extra), warmup, size, ctx))
                    if r is None:
                        row.append(GridCell("not_run", (None,)))
                    else:
                        row.append(GridCell(grid_status(r.status), (_sweep_value(r, metric),),
                                            r.error.message if r.error else None))
                rows.append(tuple(row))
            out.append(GridTable(title, "size", "ctx", tuple(sp.sizes), ctxs, tuple(rows)))
    return out

"""An attention grid as a report: per-variant tables like the hand-written ones, a side-by-side
comparison with speedups over naive eager attention, computed findings, CSV rows and `{"cells": [...]}`."""
from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from perfconsole.core.reports.sweep import GridCell, GridTable, grid_status
from perfconsole.core.stats import ratio_text

if TYPE_CHECKING:
    from perfconsole.core.grids.attention import AttentionRecord, AttentionResult

STATUS_TEXT = {"ok": "ok", "oom": "**OOM**", "pending": "not run", "cancelled": "cancelled", "error": "error"}
ATTENTION_METRICS = {"fwd_bwd_ms": "forward / backward (ms)", "memory_mib": "memory before backward (MiB)"}


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _m(s) -> float | None:
    return None if s is None else s.mean


def cell_document(c: AttentionResult) -> dict[str, Any]:
    cell = c.cell
    return {"d": cell.d, "seq": cell.seq, "batch": cell.batch, "impl": cell.impl, "compile": cell.compile,
            "variant": cell.variant, "precision": cell.precision, "warmup": cell.warmup, "iters": cell.iters,
            "status": {"pending": "not_run"}.get(c.status, c.status),
            "forward_ms": _m(c.forward_ms), "forward_std_ms": c.forward_ms.std if c.forward_ms else None,
            "backward_ms": _m(c.backward_ms), "backward_std_ms": c.backward_ms.std if c.backward_ms else None,
            "memory_before_backward_mib": c.memory_before_backward_mib,
            "peak_allocated_mib": c.peak_allocated_mib, "error": c.error}


def json_text(a: AttentionRecord) -> str:
    doc = {"kind": "attention", "id": a.id, "name": a.name, "created": a.created, "status": a.status,
           "spec": a.spec.to_dict(), "environment": a.environment, "cells": [cell_document(c) for c in a.cells]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def csv_text(a: AttentionRecord) -> str:
    out = io.StringIO()
    rows = [cell_document(c) for c in a.cells]
    w = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["d"], lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if v is None else v for k, v in r.items()})
    return out.getvalue()


def _variant_table(cells: list[AttentionResult]) -> list[str]:
    lines = ["| d | seq | fwd mean (ms) | fwd std (ms) | bwd mean (ms) | bwd std (ms) | mem before bwd (MiB) | "
             "peak (MiB) | status |", "| --: | --: | --: | --: | --: | --: | --: | --: | :-- |"]
    for c in cells:
        lines.append(f"| {c.cell.d} | {c.cell.seq} | {_f(_m(c.forward_ms))} | {_f(c.forward_ms.std if c.forward_ms else None)} "
                     f"| {_f(_m(c.backward_ms))} | {_f(c.backward_ms.std if c.backward_ms else None)} "
                     f"| {_f(c.memory_before_backward_mib, 1)} | {_f(c.peak_allocated_mib, 1)} "
                     f"| {STATUS_TEXT.get(c.status, c.status)} |")
    return lines


def _total(c: AttentionResult) -> float | None:
    if c.status != "ok" or c.forward_ms is None or c.backward_ms is None:
        return None
    return c.forward_ms.mean + c.backward_ms.mean


def _side_by_side(a: AttentionRecord, precision: str) -> list[str]:
    variants = [v + ("+compile" if comp else "") for v, comp in a.spec.variants()]
    by = {(c.cell.variant, c.cell.d, c.cell.seq): c for c in a.cells if c.cell.precision == precision}
    base = variants[0]
    head = ["d", "seq"] + [f"{v} fwd+bwd (ms)" for v in variants] + [f"{v} speedup" for v in variants[1:]]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["--:"] * len(head)) + " |"]
    for d in sorted(a.spec.ds):
        for s in sorted(a.spec.seqs):
            cells = [by.get((v, d, s)) for v in variants]
            totals = [_total(c) if c else None for c in cells]
            row = [str(d), str(s)] + [_f(t) if t is not None else STATUS_TEXT.get(c.status, c.status) if c else "-"
                                      for t, c in zip(totals, cells)]
            row += [f"**{ratio_text(totals[0] / t, faster=False)}**" if t and totals[0] else "-" for t in totals[1:]]
            lines.append("| " + " | ".join(row) + " |")
    lines.insert(0, f"Speedups are against {base}; a cell that did not finish both passes shows its status.")
    lines.insert(1, "")
    return lines


def findings(a: AttentionRecord) -> list[str]:
    out: list[str] = []
    ok = [c for c in a.cells if c.status == "ok" and c.forward_ms and c.backward_ms]
    if ok:
        ratios = [c.backward_ms.mean / c.forward_ms.mean for c in ok]
        out.append(f"backward / forward: {sum(ratios) / len(ratios):.2f} on average "
                   f"({min(ratios):.2f} – {max(ratios):.2f}) over {len(ok)} cells")
    ooms: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for c in a.cells:
        if c.status == "oom":
            key = (c.cell.variant, c.cell.precision)
            ooms[key][c.cell.d] = min(ooms[key].get(c.cell.d, c.cell.seq), c.cell.seq)
    for (variant, prec), per_d in ooms.items():
        where = ", ".join(f"d {d} from seq {s}" for d, s in sorted(per_d.items()))
        partial = [c for c in a.cells if c.status == "oom" and c.cell.variant == variant and c.forward_ms]
        out.append(f"{variant} {prec} runs out of memory: {where}"
                   + (f" ({len(partial)} of them in the backward, after the forward fit)" if partial else ""))
    if not ooms:
        out.append("no cell ran out of memory")
    variants = [v + ("+compile" if comp else "") for v, comp in a.spec.variants()]
    by = {(c.cell.variant, c.cell.precision, c.cell.d, c.cell.seq): _total(c) for c in a.cells}
    for v in variants[1:]:
        ratios = [by[(variants[0], p, d, s)] / t for (vv, p, d, s), t in by.items()
                  if vv == v and t and by.get((variants[0], p, d, s))]
        if ratios:
            gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
            out.append(f"{v} against {variants[0]}: speedup {ratio_text(gm, faster=False)} (geometric mean of "
                       f"fwd+bwd over {len(ratios)} cells, {ratio_text(min(ratios), faster=False)} – "
                       f"{ratio_text(max(ratios), faster=False)})")
    growth = []
    mem = {(c.cell.variant, c.cell.precision, c.cell.d, c.cell.seq): c.memory_before_backward_mib for c in a.cells}
    for (v, p, d, s), m in mem.items():
        m2 = mem.get((v, p, d, 2 * s))
        if v == variants[0] and m and m2 and s >= 1024:
            growth.append(m2 / m)
    if growth:
        out.append(f"memory before backward grows {min(growth):.1f}x – {max(growth):.1f}x when seq doubles "
                   f"(from seq 1024 up, {variants[0]}): the seq x seq score matrices dominate")
    return out


def markdown(a: AttentionRecord) -> str:
    sp, env = a.spec, a.environment
    lines = [f"# {a.name}", "",
             f"- status: **{a.status}**",
             f"- device: {env.get('gpu_name') or env.get('cpu') or sp.device}; torch {env.get('torch', '?')}, "
             f"CUDA {env.get('cuda') or '-'}",
             f"- causal attention on random Q, K, V of shape (batch {sp.batch}, seq, d); {sp.warmup} warm-up "
             f"pass{'' if sp.warmup == 1 else 'es'}, then {sp.iters} timed forward and {sp.iters} timed backward "
             f"pass{'' if sp.iters == 1 else 'es'} per cell; "
             "one process per cell", ""]
    for prec in sp.precisions:
        for impl, comp in sp.variants():
            variant = impl + ("+compile" if comp else "")
            cells = [c for c in a.cells if c.cell.variant == variant and c.cell.precision == prec]
            lines += [f"## {variant} · {prec}", ""] + _variant_table(cells) + [""]
        if len(sp.variants()) > 1:
            lines += [f"## Side by side · {prec}", ""] + _side_by_side(a, prec) + [""]
    lines += ["## Findings", ""] + [f"- {f}" for f in findings(a)]
    return "\n".join(lines) + "\n"


def grid_tables(a: AttentionRecord, metric: str = "fwd_bwd_ms") -> list[GridTable]:
    """One table per (precision, variant): d as rows, seq as columns. `fwd_bwd_ms` cells hold (forward,
    backward) means, `memory_mib` cells the memory before backward; an OOM in the backward keeps its forward."""
    if metric not in ATTENTION_METRICS:
        raise ValueError(f"metric: must be one of {', '.join(ATTENTION_METRICS)}, not {metric!r}")
    sp = a.spec
    ds, seqs = tuple(sorted(sp.ds)), tuple(sorted(sp.seqs))
    by = {(c.cell.precision, c.cell.variant, c.cell.d, c.cell.seq): c for c in a.cells}
    out = []
    for prec in sp.precisions:
        for impl, comp in sp.variants():
            variant = impl + ("+compile" if comp else "")
            rows = []
            for d in ds:
                row = []
                for s in seqs:
                    c = by.get((prec, variant, d, s))
                    if c is None:
                        row.append(GridCell("not_run", (None,) * (2 if metric == "fwd_bwd_ms" else 1)))
                        continue
                    values = ((_m(c.forward_ms), _m(c.backward_ms)) if metric == "fwd_bwd_ms"
                              else (c.memory_before_backward_mib,))
                    row.append(GridCell(grid_status(c.status), values, c.error))
                rows.append(tuple(row))
            out.append(GridTable(f"{variant} · {prec}", "d", "seq", ds, seqs, tuple(rows)))
    return out

"""A comparison of two or more runs: what differs in their specs and what that did to the numbers.

The first run is the baseline. Speedups are baseline time / run time with a 95% interval; an interval
that holds 1.0 reads "no significant difference", and fewer than three steps (or processes) a side read
"too few ... for an interval". With several processes a run, the speedup is of the mean of each process's median
step and tokens/s of every step pooled; where the two disagree, `throughput_note` says so and why. Category
shares and the kernels whose time moved most come from the runs' profiles where they have one. Saved as
snapshot kind "comparison" (the runs themselves are stored inside, so a comparison reopens without the run
files) and exported as Markdown, CSV or JSON.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any


from perfconsole.core.profiling.categories import categorize
from perfconsole.core.record import RunRecord
from perfconsole.core.stats import SPEEDUP_MIN_N, Speedup, Stat, interval_text, ratio_text, speedup
from perfconsole.core.profiling.loaded import loaded_of

# Fields that change what a step computes; the others (precision, attention, compile, ...) change how.
WORK_FIELDS = ("model", "model_args", "size", "d_model", "d_ff", "n_layers", "n_heads", "ctx", "batch", "mode", "vocab_size")
PHASE_NAMES = ("forward_ms", "backward_ms", "optimizer_ms", "total_ms")
KERNEL_TABLE = "cuda_gpu_kern_sum"


class CompareError(ValueError):
    pass


@dataclass(frozen=True)
class NoSpeedup(Speedup):
    """A run's place in the speedups where there is none to give, with the reason in words: its baseline or
    itself measured no step (a run cancelled before its first). Reads as not significant, with no figures."""
    reason: str = "no speedup"


def _no_speedup(base: Stat | None) -> NoSpeedup:
    why = "no baseline steps" if base is None or not base.mean > 0 else "no measured steps"
    return NoSpeedup(math.nan, math.nan, math.nan, reason=why)


@dataclass(frozen=True)
class KernelMove:
    """One kernel's total time (ns) in each run (None where the run lacks it), and its largest move."""
    name: str
    category: str
    times_ns: list[int | None]
    delta_ns: int          # largest |run - baseline| among the runs, signed

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "category": self.category, "times_ns": self.times_ns,
                "delta_ns": self.delta_ns}


@dataclass
class Comparison:
    runs: list[RunRecord]
    name: str = ""
    kind: str = field(default="comparison", init=False)

    def __post_init__(self) -> None:
        if len(self.runs) < 2:
            raise CompareError("compare: mark at least two runs")
        if not self.name:
            self.name = " vs ".join(r.name for r in self.runs)

    @property
    def baseline(self) -> RunRecord:
        return self.runs[0]

    # --- what differs ------------------------------------------------------------------------
    def spec_differences(self) -> dict[str, list[Any]]:
        """Spec fields whose value is not the same in every run, in RunSpec field order."""
        dicts = [r.spec.to_dict() for r in self.runs]
        return {k: [d[k] for d in dicts] for k in dicts[0] if len({json.dumps(d[k]) for d in dicts}) > 1}

    def unlike_work(self) -> list[str]:
        """The spec fields that change the work a step does (model, tokens, mode) and differ here."""
        return [k for k in self.spec_differences() if k in WORK_FIELDS]

    def work_note(self) -> str | None:
        """A warning when the runs do different work: their step-time ratio is not a speedup."""
        unlike = self.unlike_work()
        if not unlike:
            return None
        return (f"unlike work: {', '.join(unlike)} differ, so the step-time ratio compares different work, "
                f"not one configuration made faster; compare tokens/s, or runs that differ only in how they run")

    def phase_stats(self, phase: str) -> list[Stat | None]:
        return [getattr(r.summary, phase) if r.summary else None for r in self.runs]

    def between_processes(self) -> bool:
        """True when every run has replicate processes: speedups then use the spread between them."""
        return all(r.summary is not None and r.summary.between_processes for r in self.runs)

    def interval_basis(self) -> str:
        """What the speedup intervals cover, in words (they vouch for less with one process a side)."""
        if self.between_processes():
            n = ", ".join(str(r.summary.processes) for r in self.runs)  # type: ignore[union-attr]
            return f"intervals between processes (medians of {n} processes)"
        return ("intervals within one process per run: they do not cover the spread between processes "
                "(run with --repeat N for that)")

    def speedup_stats(self, phase: str = "total_ms") -> list[Stat | None]:
        """The statistics a speedup is a ratio of: those of the processes' medians where every run has
        replicate processes, else those of the steps."""
        if self.between_processes():
            return [r.summary.interval_stat(phase) if r.summary else None for r in self.runs]
        return self.phase_stats(phase)

    def basis(self, stat: str = "mean") -> str:
        """The name of the figure a speedup is a ratio of ("mean of the processes' median steps", "mean step"),
        or with stat="median" of its neighbour: the CLI, the console and every export print it so."""
        return f"{stat} of the processes' median steps" if self.between_processes() else f"{stat} step"

    def speedup_rule(self) -> str:
        return f"speedup = the baseline's {self.basis()} / the run's"

    def speedups(self, phase: str = "total_ms") -> list[Speedup | None]:
        """Speedup of each run against the baseline (see `speedup_stats`): None for the baseline, a NoSpeedup
        saying why where the baseline or the run measured no step."""
        stats = self.speedup_stats(phase)
        base = stats[0]
        out: list[Speedup | None] = [None]
        for st in stats[1:]:
            out.append(speedup(base, st) if base is not None and st is not None and base.mean > 0 and st.mean > 0
                       else _no_speedup(base))
        return out

    def speedup_texts(self, phase: str = "total_ms") -> list[str]:
        """Each run's speedup in words (`speedup_text`), too few values counted as steps or processes."""
        of = "processes" if self.between_processes() else "steps"
        return [speedup_text(s, of) for s in self.speedups(phase)]

    def tokens_per_s(self) -> list[float | None]:
        return [r.summary.tokens_per_s if r.summary else None for r in self.runs]

    def tokens_per_s_ratios(self) -> list[float | None]:
        """Each run's tokens/s over the baseline's (1.0 for the baseline; None where either has none)."""
        tps = self.tokens_per_s()
        return [t / tps[0] if t and tps[0] else None for t in tps]

    def throughput_note(self) -> str | None:
        """Why tokens/s and the speedup disagree, where they do. With several processes a run the speedup is
        a ratio of the mean of each process's median step, and tokens/s divide by the mean of every step
        pooled: a process's slow steps weigh in the second only. With one process a run both are of the same
        mean step; unlike work has its own warning (`work_note`)."""
        if not self.between_processes() or self.unlike_work():
            return None
        parts = [f"run {i}: {ratio_text(t)} by tokens/s, {ratio_text(s.ratio)} by the speedup"
                 for i, (t, s) in enumerate(zip(self.tokens_per_s_ratios(), self.speedups()), start=1)
                 if i > 1 and t is not None and s is not None and not isinstance(s, NoSpeedup)
                 and ratio_text(t) != ratio_text(s.ratio)]
        if not parts:
            return None
        return (f"tokens/s and the speedup differ ({'; '.join(parts)}): tokens/s divide by the mean of every step of "
                f"every process pooled, the speedup by the mean of each process's median step, so a process's "
                f"slow steps weigh in tokens/s and not in the speedup")

    def scaling(self) -> list[str]:
        """Each data-parallel run's weak-scaling efficiency against its one-process run, with the interval
        between its ranks where known; "-" for one-process runs and jobs without a baseline."""
        out = []
        for r in self.runs:
            sm = r.summary
            if sm is None or sm.scaling_efficiency is None:
                out.append("-")
                continue
            text = f"{sm.scaling_efficiency:.1%}"
            if sm.scaling_efficiency_ci95:
                text += f" [{sm.scaling_efficiency_ci95[0]:.1%}, {sm.scaling_efficiency_ci95[1]:.1%}]"
            out.append(text)
        return out

    def communication(self) -> dict[str, list[float | None]]:
        """A data-parallel run's communication figures by row (README, "Data parallel"): the median
        time with a collective in flight, what the step waited for, the collectives alone and their bus
        bandwidth, and the link's. Only rows some run has; None for the runs without them."""
        def alone(r: RunRecord, key: str) -> float | None:
            return (r.collectives or {}).get(key)

        rows = {
            "comm (ms)": [r.summary.comm_ms.median if r.summary and r.summary.comm_ms else None for r in self.runs],
            "exposed (ms)": [r.summary.exposed_comm_ms if r.summary else None for r in self.runs],
            "collectives alone (ms)": [alone(r, "alone_ms") for r in self.runs],
            "their bus GB/s": [alone(r, "busbw_gbps") for r in self.runs],
            "link bus GB/s": [alone(r, "link_busbw_gbps") for r in self.runs],
        }
        return {k: v for k, v in rows.items() if any(x is not None for x in v)}

    def peak_memory_mib(self) -> list[float | None]:
        out: list[float | None] = []
        for r in self.runs:
            v = r.summary.peak_allocated_mib if r.summary else None
            out.append(v if v is not None else (r.memory.peak_allocated_mib if r.memory else None))
        return out

    # --- profiles ----------------------------------------------------------------------------
    def category_shares(self) -> list[dict[str, float] | None]:
        """Per run, category -> share of kernel time (None where the run has no kernel table)."""
        out: list[dict[str, float] | None] = []
        for r in self.runs:
            p = r.profile
            out.append({c.category: c.share for c in loaded_of(p).category_shares()} if p and p.tables.get(KERNEL_TABLE) else None)
        return out

    def kernel_moves(self, top: int = 10) -> list[KernelMove]:
        """Kernels whose total time changed most against the baseline; empty without two kernel tables."""
        per_run: list[dict[str, int] | None] = []
        for r in self.runs:
            rows = (r.profile.tables.get(KERNEL_TABLE) if r.profile else None) or None
            if rows is None:
                per_run.append(None)
                continue
            totals: dict[str, int] = {}
            for row in rows:
                totals[row["name"]] = totals.get(row["name"], 0) + int(row["total_time_ns"])
            per_run.append(totals)
        base = per_run[0]
        if base is None or all(t is None for t in per_run[1:]):
            return []
        names = set(base).union(*(t for t in per_run[1:] if t is not None))
        moves = []
        for name in names:
            times = [None if t is None else t.get(name, 0) for t in per_run]
            deltas = [(t - times[0]) for t in times[1:] if t is not None]
            delta = max(deltas, key=abs)
            if delta:
                moves.append(KernelMove(name, categorize(name), times, delta))
        moves.sort(key=lambda m: (-abs(m.delta_ns), m.name))
        return moves[:top]

    # --- snapshot form -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "runs": [r.to_dict() for r in self.runs]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        return cls([RunRecord.from_dict(r) for r in d["runs"]], name=d.get("name", ""))


def speedup_text(s: Speedup | None, of: str = "steps") -> str:
    """"1.85x faster (95% CI [1.70, 2.01])", "4.80x slower (95% CI [4.40, 5.24])", "no significant
    difference" when the interval holds 1, or "too few steps for an interval" (`of`: steps, or processes
    where the speedup is between them). A slowdown's interval is the speedup's turned over (1/high, 1/low),
    so the figures in brackets always bound the figure before them; the JSON keeps the speedup's own."""
    if s is None:
        return "baseline"
    if isinstance(s, NoSpeedup):
        return s.reason
    words = ratio_text(s.ratio)
    if math.isnan(s.ci95_low):
        return f"{words} (too few {of} for an interval: {s.n} a side, {SPEEDUP_MIN_N} needed)"
    low, high = (s.ci95_low, s.ci95_high) if s.ratio >= 1 else (1 / s.ci95_high, 1 / s.ci95_low)
    if not s.significant:
        return f"no significant difference ({ratio_text(s.ratio, faster=False)}, 95% CI {interval_text(low, high, '.2f')})"
    return f"{words} (95% CI {interval_text(low, high, '.2f')})"


# --- exports -------------------------------------------------------------------------------------

def document(c: Comparison) -> dict[str, Any]:
    """The JSON form of a comparison: derived numbers, with run ids to tie them to the runs."""
    def stat(s: Stat | None) -> dict[str, float] | None:
        return None if s is None else {k: getattr(s, k) for k in ("n", "mean", "std", "median", "min", "max",
                                                                   "ci95_low", "ci95_high", "ci95_of")}

    of = "processes" if c.between_processes() else "steps"

    def sp(s: Speedup | None) -> dict[str, Any] | None:
        if isinstance(s, NoSpeedup):
            return {"ratio": None, "ci95_low": None, "ci95_high": None, "significant": False, "text": s.reason}
        return None if s is None else {"ratio": s.ratio, "ci95_low": _num(s.ci95_low),
                                       "ci95_high": _num(s.ci95_high), "significant": s.significant,
                                       "text": speedup_text(s, of)}

    return {
        "name": c.name,
        "runs": [{"id": r.id, "name": r.name, "status": r.status, "spec": r.spec.to_dict()} for r in c.runs],
        "baseline": c.baseline.id,
        "spec_differences": c.spec_differences(),
        "phases": {p: [stat(s) for s in c.phase_stats(p)] for p in PHASE_NAMES},
        "speedup": {p: [sp(s) for s in c.speedups(p)] for p in PHASE_NAMES},
        "speedup_basis": "between_processes" if c.between_processes() else "one_process",
        "speedup_of": {"name": c.basis(), "ms": [None if s is None else s.mean for s in c.speedup_stats()]},
        "unlike_work": c.unlike_work(),
        "tokens_per_s": c.tokens_per_s(),
        "tokens_per_s_ratio": c.tokens_per_s_ratios(),
        "throughput_note": c.throughput_note(),
        "scaling_efficiency": [r.summary.scaling_efficiency if r.summary else None for r in c.runs],
        "scaling_efficiency_ci95": [r.summary.scaling_efficiency_ci95 if r.summary else None for r in c.runs],
        "communication": c.communication(),
        "peak_allocated_mib": c.peak_memory_mib(),
        "category_shares": c.category_shares(),
        "kernel_moves": [m.to_dict() for m in c.kernel_moves()],
    }


def _num(v: float) -> float | None:
    return None if math.isnan(v) else v


def _f(v: float | None, fmt: str = ",.3f") -> str:
    return "-" if v is None else format(v, fmt)


def markdown(c: Comparison) -> str:
    runs = c.runs
    head = "| | " + " | ".join(f"{i}: {r.name}" for i, r in enumerate(runs, start=1)) + " |"
    sep = "| --- |" + " --: |" * len(runs)
    lines = [f"# Comparison: {c.name}", "", f"Baseline: run 1 ({c.speedup_rule()}); {c.interval_basis()}.", ""]
    note = c.work_note()
    if note:
        lines += [f"**Warning: {note}.**", ""]
    diffs = c.spec_differences()
    lines += ["## Spec differences", ""]
    if diffs:
        lines += [head, sep] + [f"| {k} | " + " | ".join(str(v) for v in vals) + " |" for k, vals in diffs.items()]
    else:
        lines.append("The specs are identical.")
    pooled = "the steps of all processes pooled" if c.between_processes() else "the steps"
    lines += ["", f"## Step and phase times (ms, mean ± std of {pooled})", "", head, sep]
    for p in PHASE_NAMES:
        stats = c.phase_stats(p)
        if any(s is not None for s in stats):
            lines.append(f"| {p[:-3]} | " + " | ".join("-" if s is None else f"{s.mean:.3f} ± {s.std:.3f}"
                                                       for s in stats) + " |")
    lines.append(f"| {c.basis()} (ms) | " + " | ".join(_f(None if s is None else s.mean) for s in c.speedup_stats())
                 + " |")
    lines.append("| speedup (step) | " + " | ".join(c.speedup_texts()) + " |")
    lines.append("| tokens/s | " + " | ".join(_f(v, ",.0f") for v in c.tokens_per_s()) + " |")
    lines.append("| peak allocated (MiB) | " + " | ".join(_f(v, ",.0f") for v in c.peak_memory_mib()) + " |")
    if any(s != "-" for s in c.scaling()):
        lines.append("| weak-scaling efficiency | " + " | ".join(c.scaling()) + " |")
    lines += [f"| {k} | " + " | ".join(_f(v, ",.2f") for v in vals) + " |" for k, vals in c.communication().items()]
    throughput = c.throughput_note()
    if throughput:
        lines += ["", f"Note: {throughput}."]
    shares = c.category_shares()
    if any(s is not None for s in shares):
        cats = sorted({k for s in shares if s for k in s}, key=lambda k: -max((s or {}).get(k, 0) for s in shares))
        lines += ["", "## Kernel time by category", "", head, sep]
        lines += [f"| {k} | " + " | ".join("-" if s is None else f"{s.get(k, 0):.1%}" for s in shares) + " |"
                  for k in cats]
    moves = c.kernel_moves()
    if moves:
        lines += ["", "## Kernels whose time moved most (total ms)", "",
                  "| kernel | category | " + " | ".join(f"run {i}" for i in range(1, len(runs) + 1)) + " | change |",
                  "| --- | --- |" + " --: |" * (len(runs) + 1)]
        for m in moves:
            name = m.name if len(m.name) <= 80 else m.name[:77] + "..."
            lines.append(f"| `{name}` | {m.category} | "
                         + " | ".join(_f(None if t is None else t / 1e6) for t in m.times_ns)
                         + f" | {m.delta_ns / 1e6:+,.3f} |")
    return "\n".join(lines) + "\n"


def csv_text(c: Comparison) -> str:
    """Long form, one value per row: section, metric, run number (1 the baseline, as everywhere), run name, value."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["section", "metric", "run", "run_name", "value"])

    def rows(section: str, metric: str, values: list[Any]) -> None:
        for i, (r, v) in enumerate(zip(c.runs, values), start=1):
            w.writerow([section, metric, i, r.name, "" if v is None else v])

    for k, vals in c.spec_differences().items():
        rows("spec", k, vals)
    for p in PHASE_NAMES:
        stats = c.phase_stats(p)
        if any(s is not None for s in stats):
            for stat_name in ("mean", "std", "median"):
                rows("phase", f"{p}.{stat_name}", [None if s is None else getattr(s, stat_name) for s in stats])
    rows("speedup", f"{c.basis()} (ms)", [None if s is None else s.mean for s in c.speedup_stats()])
    sps = [None if isinstance(s, NoSpeedup) else s for s in c.speedups()]
    rows("speedup", "total_ms.ratio", [None if s is None else s.ratio for s in sps])
    rows("speedup", "total_ms.ci95_low", [None if s is None else _num(s.ci95_low) for s in sps])
    rows("speedup", "total_ms.ci95_high", [None if s is None else _num(s.ci95_high) for s in sps])
    rows("throughput", "tokens_per_s", c.tokens_per_s())
    rows("throughput", "tokens_per_s.ratio", c.tokens_per_s_ratios())
    rows("memory", "peak_allocated_mib", c.peak_memory_mib())
    rows("scaling", "efficiency", [r.summary.scaling_efficiency if r.summary else None for r in c.runs])
    for k, vals in c.communication().items():
        rows("communication", k, vals)
    shares = c.category_shares()
    for k in sorted({k for s in shares if s for k in s}):
        rows("category_share", k, [None if s is None else s.get(k, 0.0) for s in shares])
    for m in c.kernel_moves():
        rows("kernel_total_ns", m.name, m.times_ns)
    return out.getvalue()


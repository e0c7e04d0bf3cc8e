"""The profile section of a run report: what the hand-written reports compute from nsys by hand.

Category shares over all kernels and per phase, the top kernels, softmax against the two attention
matmuls, and the profiler's forward against the console's own timed forward. All of it is computed
by core.profiling.categories from the stored tables; nothing here is stored.
"""
from __future__ import annotations

from perfconsole.core.profiling.categories import (category_shares, forward_check, phase_shares,
                                                   softmax_vs_matmuls, top_kernels)
from perfconsole.core.record import Profile
from perfconsole.core.summary import Summary

NAME_WIDTH = 90


def _ms(ns: int | float) -> str:
    return f"{ns / 1e6:,.3f}"


def _name(name: str) -> str:
    name = name.replace("|", "\\|")
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 3] + "..."


def markdown_lines(profile: Profile, summary: Summary | None, steps: int | None) -> list[str]:
    tables = profile.tables
    source = {"nsys": "Nsight Systems", "torch": "the PyTorch profiler", "import": "imported files"}.get(
        profile.profiler, profile.profiler)
    lines = ["", f"## Profile ({source})", ""]
    shares = category_shares(tables)
    if shares:
        total = sum(c.total_ns for c in shares)
        lines += [f"Kernel time in all: {_ms(total)} ms.", "",
                  "| category | total (ms) | share |", "| --- | --: | --: |"]
        lines += [f"| {c.category} | {_ms(c.total_ns)} | {c.share:.1%} |" for c in shares]
    phases = [p for p in phase_shares(tables) if p.total_ns]
    if phases:
        cats = sorted({c.category for p in phases for c in p.categories})
        lines += ["", "Share of each category per phase (kernels inside the NVTX range):", "",
                  "| phase | kernel time (ms) | " + " | ".join(cats) + " |",
                  "| --- | --: | " + " | ".join("--:" for _ in cats) + " |"]
        for p in phases:
            by = {c.category: c.share for c in p.categories}
            lines.append(f"| {p.phase} | {_ms(p.total_ns)} | "
                         + " | ".join(f"{by[c]:.1%}" if c in by else "-" for c in cats) + " |")
    top = top_kernels(tables, n=10)
    if top.kernels:
        lines += ["", "Top kernels:", "", "| # | kernel | category | total (ms) | calls | avg (us) | share |",
                  "| --: | --- | --- | --: | --: | --: | --: |"]
        lines += [f"| {k.rank} | `{_name(k.name)}` | {k.category} | {_ms(k.total_ns)} | {k.instances:,} | "
                  f"{k.avg_ns / 1e3:,.1f} | {k.share:.1%} |" for k in top.kernels]
    findings = []
    sm = softmax_vs_matmuls(tables)
    if sm is not None and sm.softmax_over_matmuls is not None:
        findings.append(f"softmax takes {sm.softmax_over_matmuls:.0%} of the time of the two attention matmuls "
                        f"(NVTX ranges: scores {_ms(sm.scores_ns)} ms, softmax {_ms(sm.softmax_ns)} ms, "
                        f"final matmul {_ms(sm.final_matmul_ns)} ms)")
    if summary is not None and summary.forward_ms is not None:
        fc = forward_check(tables, summary.forward_ms.mean, steps)
        if fc is not None:
            findings.append(f"the profiler's forward range is {fc.profiled_ms:.3f} ms per step against "
                            f"{fc.timed_ms:.3f} ms timed ({fc.rel_diff:+.1%})")
    if findings:
        lines += ["", "Findings: " + "; ".join(findings) + "."]
    for w in profile.warnings:
        lines.append(f"- warning: {w}")
    if profile.files:
        lines += ["", "Files: " + ", ".join(f"`{f}`" for f in profile.files)]
    return lines

"""The profile section of a run report: what the hand-written reports compute from nsys by hand.

Category shares over all kernels and per phase, the top kernels, softmax against the two attention
matmuls, and the profiler's forward against the console's own timed forward. All of it is read from the
profile loaded once (core.profiling.loaded, `loaded_of`); nothing here is stored.
"""
from __future__ import annotations

from perfconsole.core.profiling.attribution import Attribution
from perfconsole.core.profiling.ncu_summary import REPLAY_WORDS
from perfconsole.core.record import Profile
from perfconsole.core.run_summary import Summary
from perfconsole.core.profiling.loaded import loaded_of

NAME_WIDTH = 90


def _ms(ns: int | float) -> str:
    return f"{ns / 1e6:,.3f}"


def _name(name: str) -> str:
    name = name.replace("|", "\\|")
    return name if len(name) <= NAME_WIDTH else name[:NAME_WIDTH - 3] + "..."


def markdown_lines(profile: Profile, summary: Summary | None, steps: int | None) -> list[str]:
    loaded = loaded_of(profile)
    source = {"nsys": "Nsight Systems", "torch": "the PyTorch profiler", "import": "imported files"}.get(
        profile.profiler, profile.profiler)
    lines = ["", f"## Profile ({source})", ""]
    replay = f" ({REPLAY_WORDS})" if loaded.replay else ""  # ncu's pages alone: times of its replays
    shares = loaded.category_shares()
    if shares:
        total = sum(c.total_ns for c in shares)
        lines += [f"Kernel time in all{replay}: {_ms(total)} ms.", "",
                  "| category | total (ms) | share |", "| --- | --: | --: |"]
        lines += [f"| {c.category} | {_ms(c.total_ns)} | {c.share:.1%} |" for c in shares]
    lines += overhead_lines(profile.overhead)
    attr = attribution(profile, summary, steps)
    if attr is not None:
        lines += attribution_lines(attr)
    phases = [p for p in loaded.phase_shares() if p.total_ns]
    if phases:
        cats = sorted({c.category for p in phases for c in p.categories})
        lines += ["", "Share of each category per phase (kernels inside the NVTX range):", "",
                  "| phase | kernel time (ms) | " + " | ".join(cats) + " |",
                  "| --- | --: | " + " | ".join("--:" for _ in cats) + " |"]
        for p in phases:
            by = {c.category: c.share for c in p.categories}
            lines.append(f"| {p.phase} | {_ms(p.total_ns)} | "
                         + " | ".join(f"{by[c]:.1%}" if c in by else "-" for c in cats) + " |")
    top = loaded.top_kernels(n=10)
    if top.kernels:
        lines += ["", f"Top kernels{replay}:", "", "| # | kernel | category | total (ms) | calls | avg (us) | share |",
                  "| --: | --- | --- | --: | --: | --: | --: |"]
        lines += [f"| {k.rank} | `{_name(k.name)}` | {k.category} | {_ms(k.total_ns)} | {k.instances:,} | "
                  f"{k.avg_ns / 1e3:,.1f} | {k.share:.1%} |" for k in top.kernels]
    findings = []
    sm = loaded.softmax_vs_matmuls()
    if sm is not None and sm.softmax_over_matmuls is not None:
        findings.append(f"softmax takes {sm.softmax_over_matmuls:.0%} of the time of the two attention matmuls "
                        f"(NVTX ranges: scores {_ms(sm.scores_ns)} ms, softmax {_ms(sm.softmax_ns)} ms, "
                        f"final matmul {_ms(sm.final_matmul_ns)} ms)")
    findings += _forward_range(profile, summary, steps)
    if findings:
        lines += ["", "Findings: " + "; ".join(findings) + "."]
    for w in profile.warnings:
        lines.append(f"- warning: {w}")
    if profile.files:
        lines += ["", "Files: " + ", ".join(f"`{f}`" for f in profile.files)]
    return lines


def attribution(profile: Profile, summary: Summary | None, steps: int | None) -> Attribution | None:
    """Kernel time per phase against the quiet program's timed phases (medians per step). The kernels
    do the same GPU work profiled or not, while a profiler stretches the host's side of a phase (the torch
    profiler doubled a 2.7B eager forward on an H200), so the quiet phases are what the kernels explain."""
    overhead = profile.overhead or {}
    timed = None
    if summary is not None:
        timed = {"forward": summary.forward_ms.median if summary.forward_ms else None,
                 "backward": summary.backward_ms.median if summary.backward_ms else None,
                 "optimizer": summary.optimizer_ms.median if summary.optimizer_ms else None}
        timed = {k: v for k, v in timed.items() if v is not None}
    host = ({"forward": summary.host_forward_ms, "backward": summary.host_backward_ms}
            if summary is not None else None)
    return loaded_of(profile).attribution(overhead.get("profiled_steps") or steps, timed, host)


def _forward_range(profile: Profile, summary: Summary | None, steps: int | None) -> list[str]:
    """The profiler's forward range (a host interval) against the host's own issue of the forward in the same
    steps, where a CUDA run recorded it, and against the timed forward (the GPU's span, on CUDA). A forward the
    GPU lags (still busy with the step before when the host begins it) spans less on the GPU than on the host."""
    o = profile.overhead or {}
    timed = (o.get("profiled_phase_ms") or {}).get("forward")
    if timed is None and summary is not None and summary.forward_ms is not None:
        timed = summary.forward_ms.mean
    host = o.get("profiled_host_forward_ms")
    reference = host if host is not None else timed
    fc = loaded_of(profile).forward_check(reference, steps) if reference is not None else None
    if fc is None:
        return []
    if host is None:
        return [f"the profiler's forward range is {fc.profiled_ms:.3f} ms per step against {fc.timed_ms:.3f} ms "
                f"timed ({fc.rel_diff:+.1%})"]
    on_gpu = f"; {timed:.3f} ms on the GPU's clock" if timed is not None else ""
    return [f"the profiler's forward range is {fc.profiled_ms:.3f} ms per step against {fc.timed_ms:.3f} ms the "
            f"host took to issue the forward in the same steps ({fc.rel_diff:+.1%}{on_gpu})"]


def attribution_lines(a: Attribution) -> list[str]:
    per = f" over {a.steps} profiled steps" if a.steps else ""
    lines = ["", f"Kernel time by phase{per} (kernels launched inside each phase's range, on any thread):", "",
             "| phase | kernel time (ms) | per step (ms) | timed per step, quiet (ms) | difference |",
             "| --- | --: | --: | --: | --: |"]
    for p in a.phases:
        lines.append(f"| {p.phase} | {p.kernel_ms:,.3f} | {_opt(p.per_step_ms)} | {_opt(p.timed_ms)} | "
                     f"{'-' if p.rel_diff is None else f'{p.rel_diff:+.1%}'} |")
    lines.append(f"| in no phase | {a.unattributed_ms:,.3f} | | | {a.unattributed_share:.1%} of kernel time |")
    for p in a.phases:
        if p.host_paced:
            part = "" if p.pacing == "whole" else " in part"
            lines += ["", f"The {p.phase} was paced by the host{part}: it took {p.host_ms:,.3f} ms to issue against "
                          f"{p.timed_ms:,.3f} ms timed, so the GPU waited between its kernels "
                          f"({p.timed_ms - (p.per_step_ms or 0):,.3f} ms per step with none running)."]
    return lines


def overhead_lines(overhead: dict | None) -> list[str]:
    if not overhead:
        return []
    kernels = overhead.get("kernels_per_step")
    quiet_k = overhead.get("quiet_kernels_per_step")
    apart = outside_capture(overhead)
    if apart is not None:
        text = (f"The headline is a plain process of the same spec ({overhead['plain_ms']:.3f} ms, median of "
                f"{overhead.get('plain_steps') or '?'} steps); the profile is another process's. Under "
                f"{overhead['profiler']}, not capturing: {apart * 100:+.1f} % ({overhead['quiet_ms']:.3f} ms, median of "
                f"{overhead['quiet_steps']} steps before the capture); capturing: {overhead['profiled_ms']:.3f} ms "
                f"per step ({overhead['profiled_ms'] / overhead['plain_ms']:.3f}x the plain step, "
                f"{overhead['ratio']:.3f}x the same process's quiet steps; median of {overhead['profiled_steps']})")
        text += spread_clause(overhead)
    else:
        text = (f"Profiling cost: {overhead['profiled_ms']:.3f} ms per step under {overhead['profiler']} against "
                f"{overhead['quiet_ms']:.3f} ms quiet in the same process ({overhead['ratio']:.3f}x, medians of "
                f"{overhead['profiled_steps']} and {overhead['quiet_steps']} steps)")
    if kernels is not None:
        text += f"; {_count(kernels)} kernels per profiled step" + (" on average" if kernels % 1 else "") + (
            f" against {_count(quiet_k)} quiet" if quiet_k is not None else " (the quiet count is not known)")
    lines = ["", text + "."]
    over = over_count(overhead)
    if over is not None:
        lines += ["", f"**The kernel table over-counts:** its kernels sum to {over[0]:,.3f} ms per profiled step, more "
                      f"than the {over[1]:,.3f} ms step they ran in; its times are not vouched for."]
    return lines


def _count(per_step: float) -> str:
    """A count per step: whole where every step launched as many ("2,237"), else its average to a tenth, which
    is as fine as the record keeps it ("2,236.5")."""
    return f"{per_step:,.0f}" if per_step % 1 == 0 else f"{per_step:,.1f}"


def plain_spread(overhead: dict | None) -> tuple[float, float, int] | None:
    """(lowest, highest, count) of the plain processes' median steps, where there were two or more."""
    ms = (overhead or {}).get("plain_process_ms") or []
    return (min(ms), max(ms), len(ms)) if len(ms) >= 2 else None


def spread_clause(overhead: dict) -> str:
    """What the cost outside the capture is worth: one process against another, held against the spread between
    plain processes of the spec where the run measured it."""
    spread = plain_spread(overhead)
    if spread is None:
        return ("; one process against one: the spread between processes of one spec, not measured here, can be "
                "larger than that (--repeat N measures it)")
    lo, hi, n = spread
    where = "within" if lo <= overhead["quiet_ms"] <= hi else "outside"
    return (f"; the {n} plain processes' medians ranged {lo:.3f}-{hi:.3f} ms ({(hi / lo - 1) * 100:.1f} % apart), "
            f"and the capture process's quiet median lies {where} that spread")


def outside_capture(overhead: dict | None) -> float | None:
    """What running under the profiler cost outside its capture, as a share of the plain process's median
    step (+0.15: 15 % slower), where the headline came from a plain process (core.launch.profiled)."""
    plain = (overhead or {}).get("plain_ms")
    quiet = (overhead or {}).get("quiet_ms")
    return quiet / plain - 1 if plain and quiet else None


# One stream runs one kernel at a time; a table past its step by more than this share counts kernels twice.
OVER_COUNT_SLACK = 1.05


def over_count(overhead: dict | None) -> tuple[float, float] | None:
    """(kernel ms per profiled step, profiled step ms) when the kernel table sums to more than the step."""
    kernel_ms = (overhead or {}).get("kernel_ms_per_step")
    step_ms = (overhead or {}).get("profiled_ms")
    if kernel_ms and step_ms and kernel_ms > OVER_COUNT_SLACK * step_ms:
        return kernel_ms, step_ms
    return None


def _opt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.3f}"


def headline(profile: Profile, summary: Summary | None, steps: int | None) -> str | None:
    """Lines for the console's Kernels pane and the CLI's profile caption, none past 80 columns: the profiler's
    kernel times summed per step over each phase's range (not the phase's timed span, which the Live pane and the
    run's table show), the share in no phase, and what a profiled step took against the quiet one (the step timed
    without the profiler). A CPU run's rows are CPU ops, and the line says so."""
    lines = []
    a = attribution(profile, summary, steps)
    if a is not None and a.phases:
        what = "CPU-op" if loaded_of(profile).mostly_aten else "kernel"
        per = "per step" if a.steps else "over the profile"
        lines += [f"the profiler's {what}-time sums {per} for each phase ({a.unattributed_share:.1%} in no phase):",
                  ", ".join(f"{p.phase} {_opt(p.per_step_ms if a.steps else p.kernel_ms)} ms" for p in a.phases)]
        lines += [f"{p.phase} host-paced{'' if p.pacing == 'whole' else ' in part'} "
                  f"(issued in {p.host_ms:,.1f} of {p.timed_ms:,.1f} ms)"
                  for p in a.phases if p.host_paced]
    o = profile.overhead
    apart = outside_capture(o)
    if o and apart is not None:
        spread = plain_spread(o)
        among = " (one process each)" if spread is None else f" (plain processes {spread[0]:.1f}-{spread[1]:.1f} ms)"
        lines += [f"under {o['profiler']}, not capturing {apart * 100:+.1f} %{among}",
                  f"a profiled step took {o['profiled_ms'] / o['plain_ms']:.2f}x the plain step (another process, "
                  "no profiler)"]
    elif o:
        lines.append(f"a profiled step took {o['ratio']:.2f}x the quiet step (the step timed without the profiler)")
    return "\n".join(lines) or None


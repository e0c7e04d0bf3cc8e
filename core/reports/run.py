"""A run as a report: the JSON document of `run --json`, and Markdown / CSV like users write by hand."""
from __future__ import annotations

import csv
import io
from typing import Any

from perfconsole.core.record import RunRecord
from perfconsole.core.reports.memory import markdown_lines as memory_lines
from perfconsole.core.reports.parallel import markdown_lines as parallel_lines
from perfconsole.core.reports.telemetry import markdown_lines as telemetry_lines
from perfconsole.core.stats import MEDIAN_CI_MIN_N, Stat, median_interval_text
from perfconsole.core.run_summary import busy_sentence
from perfconsole.core.telemetry.gpu_summary import Telemetry

STAT_KEYS = ("mean", "std", "median", "min", "max")


def _stat(s: Stat | None) -> dict[str, float] | None:
    if s is None:
        return None
    return {k: getattr(s, k) for k in STAT_KEYS} | {"n": s.n, "ci95_low": s.ci95_low, "ci95_high": s.ci95_high,
                                                    "ci95_of": s.ci95_of}


def _step(s) -> dict[str, Any]:
    d = {"index": s.index, "total_ms": s.total_ms, "forward_ms": s.forward_ms}
    if s.backward_ms is not None:
        d["backward_ms"] = s.backward_ms
    if s.optimizer_ms is not None:
        d["optimizer_ms"] = s.optimizer_ms
    return d


def run_document(r: RunRecord) -> dict[str, Any]:
    """The one JSON document of `perfconsole run --json` (and of `export --format json`)."""
    sm = r.summary
    summary = None
    if sm is not None:
        summary = {
            "total_ms": _stat(sm.total_ms), "forward_ms": _stat(sm.forward_ms),
            "backward_ms": _stat(sm.backward_ms), "optimizer_ms": _stat(sm.optimizer_ms),
            "warmup_ms": sm.warmup_ms, "tokens_per_s": sm.tokens_per_s,
            "flops_per_step": sm.flops_per_step, "flops_source": sm.flops_source, "achieved_tflops": sm.achieved_tflops,
            "peak_tflops": sm.peak_tflops, "mfu": sm.mfu,
            "peak_allocated_mib": sm.peak_allocated_mib, "peak_reserved_mib": sm.peak_reserved_mib,
            "processes": sm.processes,
            "between_processes": {k: _stat(v) for k, v in sm.between_processes.items()}
            if sm.between_processes else None,
        }
    status = {"ok": "ok", "oom": "oom", "imported": "ok"}.get(r.status, "error")
    doc: dict[str, Any] = {
        "status": status, "run_status": r.status, "id": r.id, "name": r.name, "created": r.created,
        "spec": None if r.status == "imported" else r.spec.to_dict(), "environment": r.environment,
        "warmup_steps": [_step(s) for s in r.warmup_steps], "steps": [_step(s) for s in r.steps],
        "summary": summary,
        "memory": r.memory.to_dict() if r.memory else None,
        "telemetry": r.telemetry,
        "replicates": [rep.to_dict() for rep in r.replicates],
        "error": {"kind": r.error.kind, "message": r.error.message} if r.error else None,
        "start": r.start, "compile_cache": r.compile_cache, "host": r.host,
    }
    if r.profile is not None:
        from perfconsole.core.reports.profile import attribution  # pandas: only where a profile is
        from perfconsole.core.profiling.ncu_summary import REPLAY, replay_times

        attr = attribution(r.profile, r.summary, len(r.steps) or None)
        doc["profile"] = {"profiler": r.profile.profiler, "files": r.profile.files,
                          "warnings": r.profile.warnings, "reports": sorted(r.profile.tables),
                          "overhead": r.profile.overhead, "seconds": r.profile.seconds,
                          "attribution": attr.to_dict() if attr else None,
                          "kernel_times": REPLAY if replay_times(r.profile.tables) else "profile"}
        if r.profile.tables.get("ncu_kernels"):  # Nsight Compute's why, as `kernels --why --json` gives it
            from perfconsole.core.reports.kernel_why import kernel_why

            why = kernel_why(r)
            doc["profile"]["why"] = {"kernels": why.rows, "notes": why.notes}
    return doc


def start_text(phases: dict[str, float], cache: str | None = None) -> str:
    """"start: imports 2.1 s · build 0.3 s · compile 12.0 s (cache miss)": where a run's first seconds went, in
    the order its phases ran, and whether torch.compile's cache served the compile (core.events.StartPhases)."""
    return "start: " + " · ".join(f"{name} {seconds:.1f} s" + (f" (cache {cache})" if name == "compile" and cache
                                                                else "") for name, seconds in phases.items())


def start_line(phases: dict[str, float], cache: str | None, width: int) -> str:
    """start_text where it fits in `width` characters; else the start's total, then its phases longest first,
    leaving out those under 0.05 s: an 80-column pane then shows the compile and its cache verdict, not the
    imports and the zero-second phases before them (the caller cuts what still does not fit)."""
    whole = start_text(phases, cache)
    if len(whole) <= width:
        return whole
    parts = [f"{name} {seconds:.1f} s" + (f" (cache {cache})" if name == "compile" and cache else "")
             for name, seconds in sorted(phases.items(), key=lambda kv: -kv[1]) if seconds >= 0.05]
    return f"start {sum(phases.values()):.1f} s: " + " · ".join(parts)


def profile_pass_text(seconds: dict[str, float]) -> str:
    """"profile pass: steps 2.3 s · trace 1.9 s · tables 2.1 s": what the profiled steps and their trace cost after
    the measured steps (core.measure.profile_pass); no step's time."""
    return "profile pass: " + " · ".join(f"{name} {v:.1f} s" for name, v in seconds.items())


def _thread_share(h: dict[str, Any]) -> float | None:
    """The issuing thread's CPU seconds over the wall's (one entry of a record's `host`)."""
    return h["thread_cpu_s"] / h["wall_s"] if h.get("wall_s") else None


def host_text(hosts: list[dict[str, Any]]) -> str | None:
    """"host over the measured steps: the issuing thread on a CPU 96.0 % of the wall (1.93 of 2.01 s), 3
    involuntary switches, steal 0.0 % (its CPU's 0.0 %), CPU 5 to 5 of 16": what the host gave the thread that
    issued the steps (core.measure.host_time); with several processes, the range of each figure over them."""
    if not hosts:
        return None

    def spread(values: list, fmt) -> str:
        values = [v for v in values if v is not None]
        if not values:
            return "-"
        lo, hi = min(values), max(values)
        return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"

    pct = lambda v: f"{100 * v:.1f} %"  # noqa: E731
    shares = [_thread_share(h) for h in hosts]
    head = f"host over the measured steps{f' ({len(hosts)} processes)' if len(hosts) > 1 else ''}: "
    text = head + f"the issuing thread on a CPU {spread(shares, pct)} of the wall"
    if len(hosts) == 1:
        h = hosts[0]
        text += f" ({h['thread_cpu_s']:.2f} of {h['wall_s']:.2f} s)"
    text += (f", {spread([h.get('involuntary_switches') for h in hosts], str)} involuntary switches, steal "
             f"{spread([h.get('steal_share') for h in hosts], pct)} (its CPU's "
             f"{spread([h.get('cpu_steal_share') for h in hosts], pct)})")
    if len(hosts) == 1 and len(hosts[0].get("cpus") or []) == 2 and None not in hosts[0]["cpus"]:
        a, b = hosts[0]["cpus"]
        text += f", CPU {a} to {b}" + (f" of {hosts[0]['allowed_cpus']}" if hosts[0].get("allowed_cpus") else "")
    return text


HOST_SHARE_FLAG = 0.9   # the issuing thread on a CPU for less of the wall than this, and preempted ...
PREEMPTIONS_FLAG = 1.0  # ... at least once a measured step: the host, not the program, may have set the pace


def host_flag(hosts: list[dict[str, Any]], steps: int) -> str | None:
    """One line for the CLI and the console where a process's issuing thread was taken off its CPU under its
    measured steps (core.measure.host_time), or None: "host: the issuing thread was on a CPU 49.7 % of the measured
    steps' wall, preempted 528 times in 5 steps: this process's pace may be the host's"."""
    worst = None
    for h in hosts:
        share, taken = _thread_share(h), h.get("involuntary_switches")
        if share is not None and taken is not None and share < HOST_SHARE_FLAG and taken >= PREEMPTIONS_FLAG * steps:
            if worst is None or share < worst[0]:
                worst = (share, taken, h.get("steal_share"))
    if worst is None:
        return None
    share, taken, steal = worst
    return (f"host: the issuing thread was on a CPU {100 * share:.1f} % of the measured steps' wall, preempted "
            f"{taken} times in {steps} steps" + (f", steal {100 * steal:.1f} %" if steal else "")
            + ": this process's pace may be the host's" + (f" (the worst of {len(hosts)} processes)" if len(hosts) > 1
                                                         else ""))


def tflops_text(v: float) -> str:
    """Three significant figures below 100 (a CPU's 0.0521 is not "0.0"), one decimal above."""
    return f"{v:,.1f}" if v >= 100 else f"{v:.3g}"


def _f(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def between_lines(sm, r: RunRecord) -> list[str]:
    """The spread between replicate processes: statistics of each process's median (ms)."""
    held = (f"the ranks of one job; the table above holds its {sm.total_ms.n} steps, each the slowest rank's"
            if r.spec.nproc > 1 and not r.replicates else
            f"the table above pools their {sm.total_ms.n} measured steps")
    lines = ["", f"Between processes ({sm.processes} processes, {held}; below, statistics of each process's "
             f"median):", "",
             "| phase | median (ms) | median 95% CI (ms) | mean (ms) | std (ms) | min (ms) | max (ms) | n |",
             "| --- | --: | --- | --: | --: | --: | --: | --: |"]
    for name, st in sm.between_processes.items():
        lines.append(f"| {name[:-3]} | {_f(st.median)} | {median_interval_text(st, of='processes')} | {_f(st.mean)} | "
                     f"{_f(st.std)} | {_f(st.min)} | {_f(st.max)} | {st.n} |")
    if any(st.too_few for st in sm.between_processes.values()):
        lines += ["", f"An interval of the median needs {MEDIAN_CI_MIN_N} processes or more; min and max bound these."]
    if r.replicates:
        lines.append("")
        lines.append("Per process, median step (ms): " + ", ".join(
            f"{rep.index + 1}: {_f(rep.summary.total_ms.median) if rep.summary else '-'} ({rep.status})"
            for rep in r.replicates))
    return lines


def model_text(r: RunRecord) -> str:
    """The model as every report names it: source, architecture, parameters, the user's file and its hash,
    and where its FLOPs came from; a record from before models had sources names the builtin size."""
    s, m = r.spec, r.model
    if not m:
        d_model, d_ff, n_layers, n_heads = s.dims()
        return f"{s.size} (d_model {d_model}, d_ff {d_ff}, layers {n_layers}, heads {n_heads})"
    text = f"{m.get('name')} ({m.get('source')}, {m.get('architecture')}, {m.get('params', 0):,} parameters"
    if m.get("file"):
        text += f", {m['file']} sha256 {str(m.get('file_sha256'))[:12]}"
    text += f"; FLOPs {m.get('flops_source', 'formula')}"
    if m.get("attention_flops"):
        text += f", attention {str(m['attention_flops']).split(':')[0]}"
    return text + ")"


def comm_env_text(env: dict) -> str:
    """A job's collectives' settings: NCCL's version and the variables set that decide how they run
    (core.measure.environment.COMM_VARS), or that none was."""
    named = env.get("comm_env") or {}
    where = f"NCCL {env['nccl']}" if env.get("nccl") else "no NCCL (gloo)"
    return (f"collectives: {where}; " + (", ".join(f"{k}={v}" for k, v in named.items()) if named else
                                         "none of their variables set"))


def markdown(r: RunRecord) -> str:
    if r.status == "imported":  # profiler tables only: there is no model or timing to describe
        from perfconsole.core.reports.imported import markdown as imported_markdown

        return imported_markdown(r)
    s, sm = r.spec, r.summary
    env = r.environment
    lines = [f"# {r.name}", "",
             f"- status: **{r.status}**" + (f" ({_error_text(r)})" if r.error else ""),
             f"- device: {env.get('gpu_name') or env.get('cpu') or s.device}; torch {env.get('torch', '?')}, "
             f"CUDA {env.get('cuda') or '-'}, driver {env.get('driver') or '-'}",
             f"- model: {model_text(r)}, "
             f"attention {s.attention}{', compiled' if s.compile else ''}{', TF32' if s.tf32 else ''}",
             f"- {s.warmup} warm-up + {s.steps} measured steps, batch {s.batch}, seed {s.seed}",
             *([f"- {start_text(r.start, r.compile_cache)}"] if r.start else []),
             *([f"- {profile_pass_text(r.profile.seconds)}"] if r.profile and r.profile.seconds else []),
             *([f"- {host_text(r.host)}"] if r.host else []),
             *([f"- {comm_env_text(env)}"] if s.nproc > 1 and "comm_env" in env else []), ""]
    lines += ["| size | ctx | mode | precision | avg_ms | std_ms | median_ms | tokens/s | TFLOP/s | MFU | peak_alloc (MiB) |",
              "| --- | --: | --- | --- | --: | --: | --: | --: | --: | --: | --: |"]
    if sm:
        t = sm.total_ms
        lines.append(f"| {s.model_label()} | {s.ctx} | {s.mode} | {s.precision} | {_f(t.mean)} | {_f(t.std)} | "
                     f"{_f(t.median)} | {sm.tokens_per_s:,.0f} | {tflops_text(sm.achieved_tflops)} | "
                     f"{'-' if sm.mfu is None else f'{sm.mfu:.1%}'} | {_f(sm.peak_allocated_mib, 0)} |")
        lines += ["", "| phase | mean (ms) | std (ms) | median (ms) | median 95% CI (ms) | min (ms) | max (ms) |",
                  "| --- | --: | --: | --: | --- | --: | --: |"]
        for name in ("forward_ms", "backward_ms", "optimizer_ms", "total_ms"):
            st = getattr(sm, name)
            if st is not None:
                lines.append(f"| {name[:-3]} | {_f(st.mean)} | {_f(st.std)} | {_f(st.median)} | "
                             f"{median_interval_text(st)} | {_f(st.min)} | {_f(st.max)} |")
        if t.too_few:
            lines += ["", f"{t.n} measured steps: too few for an interval of the median ({MEDIAN_CI_MIN_N} needed); "
                      f"min and max bound them."]
        if sm.between_processes:
            lines += between_lines(sm, r)
        if sm.warmup_ms:
            lines += ["", "Warm-up steps (ms): " + ", ".join(f"{w:.3f}" for w in sm.warmup_ms)
                      + f" — first step {sm.warmup_ms[0] / t.median:.1f}x the measured median."]
        findings = []
        if sm.forward_ms and sm.backward_ms:
            findings.append(f"backward / forward = {sm.backward_ms.mean / sm.forward_ms.mean:.2f}")
        if sm.optimizer_ms:
            findings.append(f"optimizer = {sm.optimizer_ms.mean / t.mean:.1%} of the step")
        busy = busy_sentence(sm.gpu_busy_share, sm.gpu_busy_source, sm.bound)
        if busy is not None:
            findings.append(busy)
        if findings:
            lines += ["", "Findings: " + "; ".join(findings) + "."]
    else:
        lines.append(f"| {s.model_label()} | {s.ctx} | {s.mode} | {s.precision} | {r.status} | | | | | | |")
    lines += parallel_lines(r)
    if r.telemetry:
        lines += telemetry_lines(Telemetry.from_dict(r.telemetry))
    if r.memory is not None and (r.memory.per_phase or r.memory.details or r.memory.alloc_retries):
        lines += memory_lines(r.memory)
    if r.profile is not None:
        lines += _profile_lines(r.profile, sm, len(r.steps) or None)
        if r.profile.tables.get("ncu_kernels"):
            from perfconsole.core.reports.kernel_why import markdown_lines as why_lines  # pandas: only where ncu ran

            lines += why_lines(r)
    return "\n".join(lines) + "\n"


def _profile_lines(*args: Any) -> list[str]:
    from perfconsole.core.reports.profile import markdown_lines  # pandas: only where a profile is

    return markdown_lines(*args)


def csv_text(r: RunRecord) -> str:
    """One row per step (warm-up flagged), with the spec's key fields repeated for pivoting; `process` is
    the replicate process a step came from (1 without --repeat), `gpu_flags` the run's telemetry flags. An import
    has no steps: a row per kernel (core.reports.imported)."""
    if r.status == "imported":
        from perfconsole.core.reports.imported import csv_text as imported_csv

        return imported_csv(r)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["run", "size", "ctx", "batch", "precision", "mode", "step", "warmup",
                "total_ms", "forward_ms", "backward_ms", "optimizer_ms", "status", "process", "gpu_flags"])
    s = r.spec
    flags = "; ".join((r.telemetry or {}).get("flags") or [])
    groups = ([(rep.index + 1, [*rep.warmup_steps, *rep.steps]) for rep in r.replicates] if r.replicates
              else [(1, [*r.warmup_steps, *r.steps])])
    for process, steps in groups:
        for st in steps:
            w.writerow([r.id, s.model_label(), s.ctx, s.batch, s.precision, s.mode, st.index, int(st.warmup),
                        st.total_ms, st.forward_ms, st.backward_ms if st.backward_ms is not None else "",
                        st.optimizer_ms if st.optimizer_ms is not None else "", r.status, process, flags])
    return out.getvalue()


def _error_text(r: RunRecord) -> str:
    """The error beside the status, the status not said twice ("unsupported (unsupported: ...)")."""
    assert r.error is not None
    return r.error.message.removeprefix(f"{r.status}:").strip() if r.error.kind == r.status else r.error.text()

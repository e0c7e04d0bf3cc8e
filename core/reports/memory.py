"""The memory section of a run report: peaks per phase, a memory-over-time chart, largest allocations.

Reads only the JSON the worker extracted (`MemoryInfo.details`); the pickle snapshot is named for
memory_viz and never opened here.
"""
from __future__ import annotations

from perfconsole.core.record import MemoryInfo

_BARS = " ▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 80) -> str:
    """One line of block characters, each the maximum of its slice of `values`."""
    if not values:
        return ""
    per = max(1, -(-len(values) // width))
    cols = [max(values[i:i + per]) for i in range(0, len(values), per)]
    lo, hi = min(cols), max(cols)
    span = (hi - lo) or 1.0
    return "".join(_BARS[1 + round((v - lo) / span * (len(_BARS) - 2))] for v in cols)


def markdown_lines(m: MemoryInfo) -> list[str]:
    lines = ["", "## Memory", "",
             f"Peak allocated **{m.peak_allocated_mib:,.0f} MiB**, peak reserved {m.peak_reserved_mib:,.0f} MiB "
             "over the measured steps."]
    if m.alloc_retries:
        lines += ["", f"**The caching allocator ran out of cached memory {m.alloc_retries:,} times** in the measured "
                      "steps and freed its cache each time (a device synchronisation): the step times include those "
                      "stalls. A smaller batch, or `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, gives it room."]
    if m.per_phase:
        lines += ["", "| phase | peak allocated (MiB) | peak reserved (MiB) | held after phase (MiB) |",
                  "| --- | --: | --: | --: |"]
        for phase, p in m.per_phase.items():
            lines.append(f"| {phase} | {p.get('peak_allocated_mib', 0):,.0f} | {p.get('peak_reserved_mib', 0):,.0f} "
                         f"| {p.get('allocated_after_mib', 0):,.0f} |")
    d = m.details or {}
    tl = d.get("timeline") or {}
    ys = tl.get("allocated_mib") or []
    if ys:
        xs = tl.get("t_ms") or []
        lines += ["", f"Allocated memory over the measured steps ({min(ys):,.0f} – {max(ys):,.0f} MiB, "
                      f"{xs[-1] - xs[0]:,.1f} ms, baseline {d.get('baseline_mib', 0):,.0f} MiB of weights and state):",
                  "", "```", sparkline(ys), "```"]
    top = d.get("top_allocations") or []
    if top:
        lines += ["", "| largest allocations (MiB) | count | allocated at |", "| --: | --: | --- |"]
        for a in top:
            where = "<br>".join(f"`{f}`" for f in a.get("frames", [])[:3]) or "-"
            lines.append(f"| {a['size_mib']:,.1f} | {a['count']} | {where} |")
    if m.snapshot_path:
        lines += ["", f"Snapshot for {d.get('viewer', 'https://pytorch.org/memory_viz')}: `{m.snapshot_path}`"]
    return lines

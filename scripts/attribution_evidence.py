"""Write the per-phase attribution evidence of profiled runs as one JSON file.

    python3 scripts/attribution_evidence.py OUT.json "COMMAND" SNAPSHOT [SNAPSHOT ...]

For each profiled run snapshot: its profiler, spec, device, `phases.{forward,backward,optimizer}`
(`kernel_ms` over the profiled steps, per step, the run's own timed median per step, difference),
`unattributed_share` (a fraction of kernel time), and the profiling overhead against the quiet steps.
`agreement` compares the profilers' per-step phase kernel times when more than one run is given.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from perfconsole.core import store
from perfconsole.core.reports.profile import attribution


def evidence(path: Path) -> dict:
    r = store.load(path)
    if r.profile is None:
        return {"snapshot": str(path), "status": r.status, "error": "no profile in this run"}
    a = attribution(r.profile, r.summary, len(r.steps) or None)
    return {"snapshot": str(path), "status": r.status, "profiler": r.profile.profiler,
            "spec": r.spec.to_dict(), "device": r.environment.get("gpu_name"),
            "torch": r.environment.get("torch"), "driver": r.environment.get("driver"),
            "step_ms_median_quiet": r.summary.total_ms.median if r.summary else None,
            "overhead": r.profile.overhead,
            **(a.to_dict() if a else {"error": "no kernel or NVTX-kernel table"})}


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out, command, runs = Path(argv[0]), argv[1], [evidence(Path(p)) for p in argv[2:]]
    doc: dict = {"command": command, "runs": runs}
    with_phases = [r for r in runs if "phases" in r]
    if len(with_phases) > 1:
        base = with_phases[0]
        doc["agreement"] = {
            f"{r['profiler']}_vs_{base['profiler']}": {
                ph: (r["phases"][ph]["per_step_ms"] / base["phases"][ph]["per_step_ms"] - 1)
                if ph in base["phases"] and ph in r["phases"] and base["phases"][ph]["per_step_ms"] else None
                for ph in ("forward", "backward", "optimizer")}
            for r in with_phases[1:]}
    if with_phases:  # the first run's figures at the top, as the results' readers look for them
        doc.update({k: with_phases[0][k] for k in ("phases", "unattributed_share", "device")})
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The table of scripts/gpu_four.sh: each program's median step, and for perfconsole's records the ranks'
medians, the host's issue time per step, the allocator's retries, and what the host gave each process's issuing
thread over its measured steps (its CPU share of the wall, its preemptions). `python3 scripts/four_gpu_table.py DIR`;
programs run as numbered pairs (ind_NAME_i, pc_NAME_i) also as each side's median over its processes."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def main(folder: Path) -> None:
    print(f"{'program':<26} {'median (ms)':>11}  details")
    for path in sorted(p for p in folder.glob("*.json") if p.stem.startswith(("ind_", "pc_"))):
        text = path.read_text(encoding="utf-8").strip()
        if not text:
            print(f"{path.stem:<26} {'-':>11}  no output (see {path.stem}.log)")
            continue
        try:
            data = json.loads(text.splitlines()[-1] if path.stem.startswith("ind_") else text)
        except ValueError:
            print(f"{path.stem:<26} {'-':>11}  unreadable")
            continue
        if data.get("program") == "independent_ddp":
            print(f"{path.stem:<26} {data['median_step_ms']:>11.2f}  ranks {[round(r, 1) for r in data['rank_median_ms']]} "
                  f"retries {data['alloc_retries']} peak MiB {data['peak_allocated_mib']} "
                  f"thread CPU share {data.get('thread_cpu_share')} preempted {data.get('involuntary_switches')}")
            continue
        data = data.get("data", data)
        s = data.get("summary") or {}
        median = (s.get("total_ms") or {}).get("median") or 0
        ranks = [round(((r.get("summary") or {}).get("total_ms") or {}).get("median") or 0, 1)
                 for r in data.get("ranks") or []]
        hosts = [round(statistics.median(h), 1) for r in data.get("ranks") or []
                 if (h := [st["host_ms"] for st in r.get("steps", []) if st.get("host_ms") is not None])]
        print(f"{path.stem:<26} {median:>11.2f}  status {data.get('status')} ranks {ranks} host issue {hosts} "
              f"retries {(data.get('memory') or {}).get('alloc_retries')} peak MiB {s.get('peak_allocated_mib')} "
              f"exposed {s.get('exposed_comm_ms')} comm_free {s.get('comm_free_ms')} "
              f"thread CPU share {[round(h['thread_cpu_s'] / h['wall_s'], 4) for h in data.get('host') or []]} "
              f"preempted {[h.get('involuntary_switches') for h in data.get('host') or []]} "
              f"thread CPU a step (ms) {[round(h['thread_cpu_s'] * 1e3 / max(1, len(data.get('steps') or [])), 1) for h in data.get('host') or []]} "
              f"NVML GPU util (median %) {((data.get('telemetry') or {}).get('summary') or {}).get('gpu_util_pct', {}).get('median')}")


def pairs(folder: Path) -> None:
    """Programs run as numbered pairs (ind_NAME_i, pc_NAME_i): each program's median over its processes, and
    perfconsole's against the independent script's."""
    groups: dict[str, dict[str, list[float]]] = {}
    for path in folder.glob("*_[0-9].json"):
        kind, _, rest = path.stem.partition("_")
        name = rest.rsplit("_", 1)[0]
        try:
            text = path.read_text(encoding="utf-8").strip()
            data = json.loads(text.splitlines()[-1] if kind == "ind" else text)
            ms = data["median_step_ms"] if kind == "ind" else data["data"]["summary"]["total_ms"]["median"]
        except (ValueError, KeyError, TypeError, IndexError):
            continue
        groups.setdefault(name, {}).setdefault(kind, []).append(ms)
    for name, got in sorted(groups.items()):
        if "ind" in got and "pc" in got:
            a, b = statistics.median(got["ind"]), statistics.median(got["pc"])
            print(f"pairs {name}: independent {a:.2f} ms ({len(got['ind'])} processes: "
                  f"{', '.join(f'{x:.2f}' for x in got['ind'])}), perfconsole {b:.2f} ms ({len(got['pc'])}: "
                  f"{', '.join(f'{x:.2f}' for x in got['pc'])}), perfconsole / independent {b / a:.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    pairs(Path(sys.argv[1]))

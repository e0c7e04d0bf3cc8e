"""Where the whole suite's CPU went, by process: the kernel's process accounting (acct's `accton`, read back with
`dump-acct`) joined to the per-test plugin's records (cpuplug.py), from the files beside this script.

    python3 by_process.py

Each process is put under the test that was running in its pytest-xdist worker when it started (its start time
has one-second resolution); a process whose parents lead to no worker (a console tmux started, and its warm
process and runs) is counted apart."""
from __future__ import annotations

import collections
import datetime
import gzip
import json
from pathlib import Path

HERE = Path(__file__).parent


def processes() -> dict[int, dict]:
    out = {}
    with gzip.open(HERE / "pacct_dump.txt.gz", "rt") as f:
        for line in f:
            f_ = [x.strip() for x in line.split("|")]
            start = datetime.datetime.strptime(f_[14], "%a %b %d %H:%M:%S %Y").replace(tzinfo=datetime.timezone.utc)
            out[int(f_[9])] = {"comm": f_[0], "cpu": (float(f_[2]) + float(f_[3])) / 100, "ppid": int(f_[10]),
                               "start": start.timestamp(), "elapsed": float(f_[4]) / 100}
    return out


def main() -> None:
    procs = processes()
    with gzip.open(HERE / "tests_cpu.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    tests = [r for r in rows if "id" in r]
    workers = {r["pid"] for r in tests}
    by_worker = collections.defaultdict(list)
    for r in tests:
        by_worker[r["pid"]].append(r)

    def worker_of(pid: int) -> int | None:
        for _ in range(50):
            if pid in workers or pid not in procs:
                break
            pid = procs[pid]["ppid"]
        return pid if pid in workers else None

    per_file = collections.defaultdict(float)
    outside = collections.Counter()
    by_comm = collections.Counter()
    for pid, p in procs.items():
        by_comm[p["comm"]] += p["cpu"]
        if pid in workers:
            continue
        w = worker_of(pid)
        if w is None:
            outside[p["comm"]] += p["cpu"]
            continue
        test = next((r["id"] for r in by_worker[w] if r["start"] - 1 <= p["start"] <= r["start"] + r["wall"] + 0.5),
                    "(between tests)")
        per_file[test.split("::")[0]] += p["cpu"]
    for r in tests:
        per_file[r["id"].split("::")[0]] += r["self"]
    print(f"all processes: {sum(by_comm.values()):.1f} CPU-s; by command name:")
    for comm, cpu in by_comm.most_common(8):
        print(f"  {cpu:7.1f}  {comm}")
    print(f"the {len(workers)} pytest-xdist workers themselves: {sum(procs[w]['cpu'] for w in workers):.1f} CPU-s")
    print(f"processes under no worker (consoles tmux started, their warm processes and runs): "
          f"{sum(outside.values()):.1f} CPU-s: " + ", ".join(f"{c} {v:.1f}" for c, v in outside.most_common(5)))
    print("test files, their own CPU and their processes':")
    for name, cpu in sorted(per_file.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {cpu:7.1f}  {name}")


if __name__ == "__main__":
    main()

"""A gate as it ran: the two programs, their records (each process a replicate), every metric's verdict, why it
stopped, and the exit code a CI job gets. Saved as snapshot kind "gate"; its runs open as a comparison (Comparison(runs))."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from perfconsole.core.gate.verdict import MetricVerdict
from perfconsole.core.record import RunRecord, new_id

MODES = ("processes", "paired")
# What the intervals are, in words, for the record and every report.
INTERVAL_METHOD = {
    "processes": "95% log-ratio t-interval over rounds (each round: A's process, then B's; the ratio of their median steps)",
    "paired": "step time: the median of the pairs' log ratios and its 95% distribution-free interval, over pairs "
              "(one step of A and one of B, alternating inside each process); other figures: log-ratio t-interval "
              "over processes",
}
# The documented exit codes (docs/gate.md). 2 is bad input, as for every command.
EXIT_PASS, EXIT_REGRESSION, EXIT_INCONCLUSIVE, EXIT_FAILED = 0, 1, 3, 4
STOPS = ("decided", "budget", "failed", "cancelled")


@dataclass
class GateRecord:
    mode: str
    programs: list[dict[str, Any]]       # core.gate.programs.Program.to_dict: label, python, revision
    runs: list[RunRecord]
    verdicts: list[MetricVerdict]
    rounds: int                          # processes of each program (paired: processes)
    wall_s: float
    budget: str
    stopped: str                         # decided | budget | failed | cancelled
    id: str = field(default_factory=new_id)
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    name: str = ""

    kind = "gate"

    def __post_init__(self) -> None:
        if not self.name:
            self.name = " vs ".join(p["label"] for p in self.programs)

    @property
    def verdict(self) -> str:
        """The gate's verdict: a failed or cancelled gate's is `failed`; else any metric's regression, else any
        inconclusive, else improved where one improved, else same."""
        if self.stopped in ("failed", "cancelled"):
            return "failed"
        seen = {v.verdict for v in self.verdicts}
        return next((w for w in ("regression", "inconclusive", "improved", "same") if w in seen), "unmeasured")

    @property
    def interval_method(self) -> str:
        return INTERVAL_METHOD[self.mode]

    def exit_code(self, inconclusive: int = EXIT_INCONCLUSIVE) -> int:
        return {"regression": EXIT_REGRESSION, "inconclusive": inconclusive, "failed": EXIT_FAILED}.get(self.verdict,
                                                                                                      EXIT_PASS)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created": self.created, "mode": self.mode,
                "verdict": self.verdict, "interval_method": self.interval_method, "programs": self.programs,
                "rounds": self.rounds, "wall_s": self.wall_s, "budget": self.budget, "stopped": self.stopped,
                "verdicts": [v.to_dict() for v in self.verdicts], "runs": [r.to_dict() for r in self.runs]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GateRecord:
        if d["mode"] not in MODES or d["stopped"] not in STOPS:
            raise ValueError(f"gate: mode {d['mode']!r} or stop {d['stopped']!r} unknown")
        return cls(d["mode"], list(d["programs"]), [RunRecord.from_dict(r) for r in d["runs"]],
                   [MetricVerdict.from_dict(v) for v in d["verdicts"]], int(d["rounds"]), float(d["wall_s"]),
                   str(d["budget"]), d["stopped"], id=d["id"], created=d.get("created", ""), name=d.get("name", ""))

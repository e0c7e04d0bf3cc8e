"""What a grid kept as one run per cell (a ladder's rungs, a scaling curve's counts) does the same whatever its
cells mean: its machine, its JSON form, and going on where it stopped. A record class lists its fields (spec,
runs, id, name, created, status, cell_seconds) and names its spec's class as `spec_class`."""
from __future__ import annotations

from typing import Any, ClassVar

from perfconsole.core.record import RunRecord


class CellRecords:
    spec_class: ClassVar[Any]
    spec: Any
    runs: list[RunRecord]
    cell_seconds: list[float | None]

    @property
    def environment(self) -> dict[str, Any]:
        return next((r.environment for r in self.runs if r.environment), {})

    def reopen_cells(self) -> list[int]:
        """Make the cells that did not finish (cancelled, or never started) pending again, so a runner goes on
        where the grid stopped; the cells that finished keep their figures. Returns the reopened cells' indices."""
        reopened = []
        for i, r in enumerate(self.runs):
            if r.status in ("pending", "running", "cancelled"):
                self.runs[i] = RunRecord(r.spec, name=r.name)
                self.cell_seconds[i] = None
                reopened.append(i)
        self.status = "pending"
        return reopened

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created": self.created, "status": self.status,
                "spec": self.spec.to_dict(), "runs": [r.to_dict() for r in self.runs],
                "cell_seconds": self.cell_seconds}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Any:
        return cls(cls.spec_class.from_dict(d["spec"]), [RunRecord.from_dict(r) for r in d["runs"]], id=d["id"],
                   name=d.get("name", ""), created=d.get("created", ""), status=d["status"],
                   cell_seconds=list(d.get("cell_seconds", [])))

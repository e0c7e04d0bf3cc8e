"""What the timeline's tests compute for themselves from a capture's own events, to hold the timeline to."""
from __future__ import annotations

import pytest


def merge(intervals) -> list[list[float]]:
    """The union of (start, end) intervals, as sorted disjoint [start, end] pairs (touching ones merged)."""
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


@pytest.fixture
def merged():
    return merge


KERNEL_ROW = ("select s.value, k.start, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, r.start, r.globalTid, "
              "'gpu' || k.deviceId || ' s' || k.streamId from CUPTI_ACTIVITY_KIND_KERNEL k "
              "join StringIds s on s.id = k.demangledName "
              "join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId "
              "where s.value {op} ? order by k.start limit 1 offset ?")


def nsys_kernel(db, name: str, nth: int, like: bool = False) -> tuple:
    """By an nsys export's own SQL, the nth kernel (by start) named `name` (a LIKE pattern with `like`): its name,
    start, grid x y z, block x y z, its launch's start and thread, and its lane's label ('gpuD sS')."""
    return db.execute(KERNEL_ROW.format(op="like" if like else "="), (name, nth)).fetchone()


def timeline_kernel(tl, label: str, start_ns: int):
    """The timeline's kernel on the lane `label` that starts at `start_ns` of the capture's clock (within 1 ns)."""
    lane = next(lane for lane in tl.lanes if lane.kind == "kernels" and lane.label == label)
    at = start_ns - round(tl.origin_us * 1000)
    position = int(lane.index.starts.searchsorted(at - 1))
    assert abs(int(lane.index.starts[position]) - at) <= 1
    return tl.kernel(lane.key, position)


@pytest.fixture
def kernel_pair():
    """(nsys_kernel, timeline_kernel): a kernel by the export's SQL and the timeline's kernel at its start."""
    return nsys_kernel, timeline_kernel

"""`nsys stats --report cuda_gpu_trace`: one row per kernel launch, copy and memset, and the kernel and
memory summaries nsys would print for the same capture, summed from it.

No fixture holds this report (FORMATS.md lists it nowhere); its header is the one nsys 2024-2026 prints,
as public projects' tests copy it: `Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,
Reg/Trd,StcSMem (MB),DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,
Strm,Name` (older ones: `Throughput (MBps)`, no GreenCtx). A copy or memset leaves the launch columns
empty, a kernel the byte columns. Columns are matched by name; the ones below are read with their type,
any other as text. A long capture gives hundreds of thousands of rows: the table is read by the CSV
library only (csv_frames' engines), empty cells as missing values.
"""
from __future__ import annotations

import io
from collections.abc import Sequence
from typing import IO

import numpy as np
import pandas as pd

from perfconsole.core.profiling import csv_frames
from perfconsole.core.profiling.columns import normalise_memop
from perfconsole.core.profiling.table import ProfileTable, frame_of

REPORT = "cuda_gpu_trace"
# header -> (column, kind): int, float (missing allowed in both) or text
COLUMNS = {
    "Start (ns)": ("start_ns", "int"), "Duration (ns)": ("duration_ns", "int"), "CorrId": ("corr_id", "int"),
    "GrdX": ("grid_x", "int"), "GrdY": ("grid_y", "int"), "GrdZ": ("grid_z", "int"),
    "BlkX": ("block_x", "int"), "BlkY": ("block_y", "int"), "BlkZ": ("block_z", "int"),
    "Reg/Trd": ("registers_per_thread", "int"), "StcSMem (MB)": ("static_smem_mb", "float"),
    "DymSMem (MB)": ("dynamic_smem_mb", "float"), "Bytes (MB)": ("bytes_mb", "float"),
    "Throughput (MB/s)": ("throughput_mb_s", "float"), "Throughput (MBps)": ("throughput_mb_s", "float"),
    "SrcMemKd": ("src_mem_kind", "text"), "DstMemKd": ("dst_mem_kind", "text"), "Device": ("device", "text"),
    "Ctx": ("context", "int"), "GreenCtx": ("green_context", "int"), "Strm": ("stream", "int"),
    "Name": ("name", "text"),
}


def is_trace_header(cells: Sequence[str]) -> bool:
    cells = [c.strip() for c in cells]
    return cells[:2] == ["Start (ns)", "Duration (ns)"] and "CorrId" in cells and cells[-1] == "Name"


def read_trace(source: IO[bytes] | bytes, headers: Sequence[str]) -> pd.DataFrame | str:
    """The trace's rows below the header line `source` starts with, or why they cannot be read."""
    if isinstance(source, (bytes, bytearray)):
        source = io.BytesIO(source)
    cols = [COLUMNS.get(h.strip(), (csv_frames.snake(h), "text")) for h in headers]
    names = [c for c, _ in cols]
    if len(set(names)) != len(names):
        return "two columns of one name"
    try:
        if csv_frames.ENGINE == "pyarrow":
            frame = _read_arrow(source, cols)
        else:
            frame = pd.read_csv(source, engine="c", header=None, skiprows=1, names=names, skip_blank_lines=True,
                                dtype={n: ("Int64" if k == "int" else "Float64" if k == "float" else str)
                                       for n, k in cols}, keep_default_na=False, na_values={n: [""] for n, k in cols
                                                                                            if k != "text"})
    except Exception as exc:  # the library's own parse errors: pyarrow's ArrowInvalid, pandas' ParserError...
        return str(exc).splitlines()[0][:200]
    for n, k in cols:
        if k == "text":
            frame[n] = frame[n].fillna("").astype("str")
    if "name" in frame.columns:
        frame["name"] = frame["name"].astype("str")
    return frame


def _read_arrow(source: IO[bytes], cols: list[tuple[str, str]]) -> pd.DataFrame:
    pa, pa_csv = csv_frames.pa, csv_frames.pa_csv
    types = {n: pa.int64() if k == "int" else pa.float64() if k == "float" else pa.large_string() for n, k in cols}
    reader = pa_csv.open_csv(
        source, read_options=pa_csv.ReadOptions(column_names=[n for n, _ in cols], skip_rows=1, block_size=1 << 20),
        parse_options=pa_csv.ParseOptions(newlines_in_values=False),
        convert_options=pa_csv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=False),
        memory_pool=pa.system_memory_pool())
    table = reader.read_all()
    return pd.DataFrame({n: (pd.Series(table.column(n), dtype="str") if k == "text"
                             else pd.Series(pd.arrays.ArrowExtensionArray(table.column(n))))
                         for n, k in cols}, copy=False)


def with_summaries(tables: dict) -> dict:
    """The tables, with cuda_gpu_kern_sum and cuda_gpu_mem_time_sum summed from a cuda_gpu_trace where
    they are absent (as nsys prints them: totals, counts, average, median, min, max and sample standard
    deviation in int ns, Time (%), largest total first)."""
    trace = tables.get(REPORT)
    if not trace or "duration_ns" not in frame_of(trace).columns:
        return tables
    frame = frame_of(trace)
    launched = frame["grid_x"].notna().to_numpy() if "grid_x" in frame.columns else np.ones(len(frame), dtype=bool)
    out = dict(tables)
    if "cuda_gpu_kern_sum" not in out and launched.any():
        out["cuda_gpu_kern_sum"] = ProfileTable(_summary(frame[launched], "instances", "name"))
    if "cuda_gpu_mem_time_sum" not in out and (~launched).any():
        ops = frame[~launched]
        ops = ops.assign(operation=pd.Series([normalise_memop(v) for v in ops["name"].tolist()], dtype="str",
                                             index=ops.index))
        out["cuda_gpu_mem_time_sum"] = ProfileTable(_summary(ops, "count", "operation"))
    return out


def _summary(rows: pd.DataFrame, count: str, label: str) -> pd.DataFrame:
    ns = pd.Series(rows["duration_ns"].to_numpy(dtype=np.int64), index=rows.index)
    g = ns.groupby(rows[label].to_numpy(), sort=False)
    out = pd.DataFrame({"total_time_ns": g.sum(), count: g.count()})
    out["avg_ns"] = np.rint(out["total_time_ns"] / out[count]).astype(np.int64)
    out["med_ns"] = np.rint(g.median()).astype(np.int64)
    out["min_ns"], out["max_ns"] = g.min(), g.max()
    out["stddev_ns"] = np.rint(g.std(ddof=1).fillna(0.0)).astype(np.int64)
    out = out.reset_index(names=label).sort_values("total_time_ns", ascending=False, kind="stable")
    grand = int(out["total_time_ns"].sum()) or 1
    pct = [round(100 * int(t) / grand, 1) for t in out["total_time_ns"].tolist()]
    order = ["time_pct", "total_time_ns", count, "avg_ns", "med_ns", "min_ns", "max_ns", "stddev_ns", label]
    out.insert(0, "time_pct", pct)
    out[label] = out[label].astype("str")
    return out[order].reset_index(drop=True)

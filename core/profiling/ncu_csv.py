"""Nsight Compute's CSV pages, read: what `ncu --csv` prints while it profiles, or `ncu --import REP --csv`
prints from a report.

- `--page details` (long form): a row per metric of each profiled launch (section, metric label, unit,
  value), then a row per rule of that section (rule name, type, text, estimated speedup type and %). The
  metrics given with `--metrics` come under their full names in the section "Command line profiler metrics".
- `--page raw` (wide): a row per launch, a column per metric under its full name, and under the header a row
  of units.

Both become one long DataFrame of metrics (a row per launch and metric: `id`, `kernel`, `section`,
`metric`, `unit` as printed, `value` in base units: seconds, bytes, hertz, percent, counts) and one of rules.
Values keep ncu's meaning; every derived figure (FLOP/s, bound, gain) is core.profiling.ncu_kernels'.
ncu prints numbers with thousands separators and scales units (`usecond`, `Gbyte/second`); both are undone
here. Lines ncu prints around the table (`==PROF==`, `==WARNING==`) are skipped.
"""
from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass

import pandas as pd

from perfconsole.core.profiling.errors import ProfileFormatError

# The columns that say which launch a row is about (the rest of the raw page's columns are metrics).
LAUNCH_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
                  "Stream", "Block Size", "Grid Size", "Device", "CC")
RULE_COLUMNS = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")
_PREFIX = {"p": 1e-12, "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9,
           "T": 1e12, "P": 1e15}
# Units ncu scales, longest first so `second` is found before `s`'s shorter forms.
_BASES = ("second", "byte", "hz", "cycle", "inst", "sector", "request", "warp", "thread", "block", "flop", "op")
_SHORT_TIME = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


@dataclass
class NcuPages:
    """What one or more ncu CSV pages hold. `metrics`: id, kernel, block, grid, device, cc, section, metric,
    unit, value (float, base units; NaN where ncu printed none), text (as printed). `rules`: id, kernel,
    section, rule, type, text, speedup_type, speedup_pct (NaN where the rule estimates none)."""
    metrics: pd.DataFrame
    rules: pd.DataFrame
    page: str  # details | raw | both

    @property
    def launches(self) -> list[int]:
        return sorted(set(self.metrics["id"]) | set(self.rules["id"]))


def scale(unit: str) -> tuple[float, str]:
    """(factor to base units, base unit) of a unit as ncu prints it: `usecond` (1e-6, second),
    `Gbyte/second` (1e9, byte/second), `cycle/nsecond` (1e9, cycle/second), `%` (1, %), `ns` (1e-9, second)."""
    unit = unit.strip()
    if unit in _SHORT_TIME:
        return _SHORT_TIME[unit], "second"
    factor, parts = 1.0, []
    for i, part in enumerate(unit.split("/")):
        f, base = _one(part)
        factor = factor * f if i == 0 else factor / f
        parts.append(base)
    return factor, "/".join(parts)


def _one(part: str) -> tuple[float, str]:
    low = part.lower()
    for base in _BASES:
        if low.endswith(base):
            prefix = part[: len(part) - len(base)]
            if prefix in _PREFIX:
                return _PREFIX[prefix], base
    return 1.0, part


def number(text: str) -> float:
    """A value as ncu prints it (`1,215,000,000.00`, `n/a`, ``) as a float; NaN where it is no number."""
    text = (text or "").strip().replace(",", "")
    return float(text) if _NUMBER.match(text) else math.nan


def _table(text: str, source: str) -> pd.DataFrame:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID",') or ln.startswith("ID,")), None)
    if start is None:
        raise ProfileFormatError(source, None, "no ncu CSV header (a line starting \"ID\",): not `ncu --csv` output")
    body = [ln for ln in lines[start:] if ln.strip() and not ln.startswith("==")]
    try:
        return pd.read_csv(io.StringIO("\n".join(body)), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, ValueError) as exc:
        raise ProfileFormatError(source, start + 1, f"unreadable ncu CSV ({exc})") from exc


def _launch_part(df: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame({"id": pd.to_numeric(df["ID"], errors="coerce").astype("Int64"),
                        "kernel": df.get("Kernel Name", pd.Series([""] * len(df), index=df.index))})
    for col, name in (("Block Size", "block"), ("Grid Size", "grid"), ("Device", "device"), ("CC", "cc")):
        out[name] = df[col] if col in df else ""
    return out


def read_details(text: str, source: str = "<details>") -> NcuPages:
    df = _table(text, source)
    missing = [c for c in ("ID", "Kernel Name", "Metric Name", "Metric Value") if c not in df]
    if missing:
        raise ProfileFormatError(source, None, f"not ncu's details page: no {', '.join(missing)} column")
    who = _launch_part(df)
    who["section"] = df["Section Name"] if "Section Name" in df else ""
    is_rule = df["Rule Name"].str.strip() != "" if "Rule Name" in df else pd.Series(False, index=df.index)
    m = df[~is_rule & (df["Metric Name"].str.strip() != "")]
    factors = m["Metric Unit"].map(lambda u: scale(u)[0]) if "Metric Unit" in m else 1.0
    metrics = who.loc[m.index].assign(metric=m["Metric Name"], unit=m.get("Metric Unit", ""),
                                      value=m["Metric Value"].map(number) * factors, text=m["Metric Value"])
    r = df[is_rule]
    rules = who.loc[r.index, ["id", "kernel", "section"]].assign(
        rule=r.get("Rule Name", ""), type=r.get("Rule Type", ""), text=r.get("Rule Description", ""),
        speedup_type=r.get("Estimated Speedup Type", ""),
        speedup_pct=r["Estimated Speedup"].map(number) if "Estimated Speedup" in r else math.nan)
    return NcuPages(metrics.reset_index(drop=True), _rules_frame(rules), "details")


def read_raw(text: str, source: str = "<raw>") -> NcuPages:
    df = _table(text, source)
    if "ID" not in df or "Kernel Name" not in df:
        raise ProfileFormatError(source, None, "not ncu's raw page: no ID or Kernel Name column")
    units = df.iloc[0] if len(df) and str(df.iloc[0]["ID"]).strip() == "" else None
    data = df.iloc[1:] if units is not None else df
    who = _launch_part(data)
    names = [c for c in df.columns if c not in LAUNCH_COLUMNS]
    if not names or data.empty:
        return NcuPages(_empty_metrics(), _rules_frame(pd.DataFrame()), "raw")
    unit_of = {n: (str(units[n]) if units is not None else "") for n in names}
    long = data[names].melt(ignore_index=False, var_name="metric", value_name="text")
    long = who.join(long).assign(section="")
    long["unit"] = long["metric"].map(unit_of)
    long["value"] = long["text"].map(number) * long["unit"].map(lambda u: scale(u)[0])
    metrics = long[["id", "kernel", "block", "grid", "device", "cc", "section", "metric", "unit", "value", "text"]
                   ].reset_index(drop=True)
    return NcuPages(metrics, _rules_frame(pd.DataFrame()), "raw")


def read_pages(details: str | None = None, raw: str | None = None, source: str = "<ncu>") -> NcuPages:
    """Either page or both: with both, a metric both name comes from the raw page (full names, every metric)
    and the details page adds its labelled ones and the rules."""
    pages = [p for p in ((read_details(details, source) if details else None),
                         (read_raw(raw, source) if raw else None)) if p is not None]
    if not pages:
        raise ProfileFormatError(source, None, "no ncu page given")
    if len(pages) == 1:
        return pages[0]
    d, r = pages
    metrics = pd.concat([r.metrics, d.metrics[~d.metrics["metric"].isin(set(r.metrics["metric"]))]],
                        ignore_index=True)
    return NcuPages(metrics, d.rules, "both")


def read_text(text: str, source: str = "<ncu>") -> NcuPages:
    """One page whose kind is told by its header: details has Metric Name and Metric Value columns."""
    head = next((ln for ln in text.splitlines() if ln.startswith('"ID",') or ln.startswith("ID,")), "")
    return read_details(text, source) if "Metric Value" in head else read_raw(text, source)


def looks_like_ncu(text: str) -> bool:
    head = next((ln for ln in text.splitlines()[:50] if ln.startswith('"ID",')), "")
    return '"Kernel Name"' in head and ('"Metric Value"' in head or '"Process ID"' in head)


def _rules_frame(rules: pd.DataFrame) -> pd.DataFrame:
    cols = ["id", "kernel", "section", "rule", "type", "text", "speedup_type", "speedup_pct"]
    return rules.reset_index(drop=True) if len(rules) else pd.DataFrame({c: [] for c in cols})


def _empty_metrics() -> pd.DataFrame:
    return pd.DataFrame({c: [] for c in ("id", "kernel", "block", "grid", "device", "cc", "section", "metric",
                                         "unit", "value", "text")})

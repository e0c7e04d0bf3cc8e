"""Each launch Nsight Compute profiled, in the figures the "why" view needs: its speed of light (compute and
memory throughput, % of the device's peak as ncu counts it), its duration under ncu, its FLOPs per precision
and where they were counted, its DRAM bytes, occupancy, launch shape and the rule ncu estimates would gain most.

FLOPs. ncu's roofline counts FLOPs from the SASS instruction counters (fadd, fmul, ffma and their half and
double forms: add + mul + 2 fma), which leave out tensor-core work: a flash-attention or GEMM kernel reads a few
TFLOP/s there while its tensor pipes run near their peak. Where the report holds the tensor pipes' op counters
(`sm__ops_path_tensor_src_<type>[_dst_<type>].sum`, 2 per multiply-add), a kernel's FLOPs are those plus the
SASS ones, and `flops_source` says `tensor pipes + sass`; where it holds only the SASS counters it says `sass`
(tensor-core work not counted); where neither, the FLOPs are None. `ncu_roofline_flops` keeps what ncu's own
roofline reads, the SASS count alone, so the two can be told apart. A page made without `--metrics` holds the
roofline section's rates instead of counts (`dram__bytes.sum.per_second`, the SASS counters'
`.sum.per_cycle_elapsed` with `smsp__cycles_elapsed.avg.per_second`): times the launch's duration they are the
same bytes and FLOPs.
"""
from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from perfconsole.core.profiling.ncu_csv import NcuPages

# field -> the names it goes by: the metric's full name (raw page; details, for --metrics), then the details
# page's label (its values rounded to two decimals of the unit it picked).
FIELDS: dict[str, tuple[str, ...]] = {
    "duration_s": ("gpu__time_duration.sum", "Duration"),
    "compute_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput"),
    "memory_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "Memory Throughput"),
    "dram_pct": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"),
    "l1_pct": ("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX Cache Throughput"),
    "l2_pct": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 Cache Throughput"),
    "sm_hz": ("gpc__cycles_elapsed.avg.per_second", "SM Frequency"),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct", "Theoretical Occupancy"),
    "registers_per_thread": ("launch__registers_per_thread", "Registers Per Thread"),
    "threads_per_block": ("launch__block_size", "Block Size"),
    "blocks": ("launch__grid_size", "Grid Size"),
    "waves_per_sm": ("launch__waves_per_multiprocessor", "Waves Per SM"),
    "shared_mem_per_block_bytes": ("launch__shared_mem_per_block",),
    "dram_read_bytes": ("dram__bytes_read.sum",),
    "dram_write_bytes": ("dram__bytes_write.sum",),
    "dram_bytes": ("dram__bytes.sum",),
}
SASS = {"fp32": "f", "fp16": "h", "fp64": "d"}
DRAM_RATE, CYCLE_RATE = "dram__bytes.sum.per_second", "smsp__cycles_elapsed.avg.per_second"
_SASS_METRIC = "smsp__sass_thread_inst_executed_op_{}{}_pred_on.sum"
_TENSOR = re.compile(r"^sm__ops_path_tensor_src_(?P<src>[a-z0-9]+?)(?:_dst_(?P<dst>[a-z0-9]+))?\.sum$")
_TENSOR_PRECISION = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "fp8": "fp8", "fp64": "fp64", "fp4": "fp4"}
BOTTLENECK_RULE = "SOLBottleneck"


_ANON = "(anonymous namespace)"
# The two demanglers' spellings, made one (kernel_key): GNU's (the torch profiler's) and NVIDIA's (ncu's, nsys's).
_LAMBDA_GNU = re.compile(r"\{lambda\([^()]*\)#(\d+)\}")                # {lambda(float)#1}
_LAMBDA_NV = re.compile(r"\[lambda\([^()]*\) \(instance (\d+)\)\]")   # [lambda(float) (instance 1)]
_CAST = re.compile(r"\((?:[\w:]+ )*[\w:]+\)(?=[-\w])")                 # (int)4, (unsigned long)1, (at::native::ADAM_MODE)1
_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.I)               # 3ul
_SCOPE = re.compile(r"(?:\(anonymous namespace\)|<unnamed>|[A-Za-z_]\w*)::")  # at::native::, <unnamed>::
_ARGS = re.compile(r"\([^()]*\)")                                        # a parameter list: GNU names types, NVIDIA T1
_WORDS = re.compile(r"\b(?:const|void)\b|\s+")


def name_head(name: str) -> str:
    """A kernel's demangled name without `void ` and without its parameter list: `(` at template depth 0 begins
    the parameters, unless it opens `(anonymous namespace)`."""
    name = str(name).strip().removeprefix("void ")
    depth, i = 0, 0
    while i < len(name):
        if name.startswith(_ANON, i):
            i += len(_ANON)
            continue
        c = name[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif c == "(" and depth == 0:
            return name[:i].strip()
        i += 1
    return name


def function_name(name: str) -> str:
    """The function alone, as ncu's `--kernel-name-base function` gives it: no namespace, template or parameters."""
    head = name_head(name).replace("<unnamed>::", "").replace(_ANON + "::", "")
    depth, cut = 0, len(head)
    for i, c in enumerate(head):
        if c == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif c == ">":
            depth -= 1
    base = head[:cut]
    return base.rsplit("::", 1)[-1].strip()


def kernel_key(name: str) -> str:
    """A kernel's name as the torch profiler (GNU's demangler) and Nsight's tools (NVIDIA's) both spell it: no
    parameters, scopes, parameter lists inside it, casts, integer suffixes, `const`, `void` or spaces; lambdas
    by their number. `at::native::(anonymous namespace)::f<float, 4, (at::native::ADAM_MODE)1, false>` and
    `at::<unnamed>::f<float, 4, 1, 0>` are one key."""
    key = _LAMBDA_NV.sub(r"lambda#\1", _LAMBDA_GNU.sub(r"lambda#\1", name_head(name)))
    key = _SUFFIX.sub(r"\1", _CAST.sub("", key))
    key = re.sub(r"\bfalse\b", "0", re.sub(r"\btrue\b", "1", key))
    key = _SCOPE.sub("", key)
    while True:
        shorter = _ARGS.sub("#", key)
        if shorter == key:
            break
        key = shorter
    return _WORDS.sub("", key.replace("#", "()")).replace("lambda()", "lambda#")


def not_profiled(asked: list[str], launches: list[dict]) -> list[str]:
    """The kernels asked of ncu (as the torch profiler names them) of which no launch is in its report (`launches`:
    ncu_kernels rows), in the order asked. The filter matches every instantiation of a function asked, each launch
    configuration once (core.launch.ncu), so what is left here is a kernel the ncu step did not run, or one whose
    two spellings (the torch profiler's, ncu's) `kernel_key` does not join."""
    got = {kernel_key(r["kernel"]) for r in launches}
    return [name for name in asked if kernel_key(name) not in got]


def sass_metrics() -> list[str]:
    """The SASS counters of ncu's roofline, as counts (`.sum`): add, mul and fma of fp32, fp16 and fp64."""
    return [_SASS_METRIC.format(p, op) for p in SASS.values() for op in ("add", "mul", "fma")]


def tensor_metric_names(base_names: list[str]) -> list[str]:
    """The tensor pipes' FLOP counters among a device's metric names (`ncu --query-metrics`), as counts:
    one per floating-point source type (and destination where the device splits it), sparsity variants left out
    (they are parts of their parent)."""
    out = []
    for name in base_names:
        m = _TENSOR.match(name + ".sum")
        if m and "sparsity" not in name and m["src"] in _TENSOR_PRECISION:  # integer ops are no FLOPs
            out.append(name + ".sum")
    return sorted(set(out))


def wide(pages: NcuPages) -> pd.DataFrame:
    """A row per launch, a column per metric name (its first value), with id and kernel."""
    m = pages.metrics.drop_duplicates(["id", "metric"])
    values = m.pivot(index="id", columns="metric", values="value")
    who = m.drop_duplicates("id").set_index("id")[["kernel", "block", "grid", "device", "cc"]]
    return who.join(values)


def _field(w: pd.DataFrame, names: tuple[str, ...]) -> pd.Series:
    out = pd.Series(math.nan, index=w.index, dtype=float)
    for name in names:
        if name in w:
            out = out.fillna(w[name].astype(float))
    return out


def _tensor_flops(w: pd.DataFrame) -> dict[str, pd.Series]:
    """Per precision: the op counters of one source type; a type's own total where the report has it, else
    the sum of its destinations (never both, which would count twice)."""
    by_src: dict[str, dict[str | None, str]] = {}
    for col in w.columns:
        m = _TENSOR.match(str(col))
        if m and m["src"] in _TENSOR_PRECISION:
            by_src.setdefault(m["src"], {})[m["dst"]] = col
    out = {}
    for src, cols in by_src.items():
        use = [cols[None]] if None in cols else list(cols.values())
        out[_TENSOR_PRECISION[src]] = sum((w[c].astype(float).fillna(0) for c in use), pd.Series(0.0, index=w.index))
    return out


def _count(w: pd.DataFrame, name: str, cycles: pd.Series) -> pd.Series | None:
    """A SASS counter's count: its `.sum`, else its rate per elapsed cycle times the cycles, as ncu's roofline
    section collects it (`.sum.per_cycle_elapsed`: a raw page with no --metrics); None where the page has neither."""
    rate = name + ".per_cycle_elapsed"
    count = w[name].astype(float) if name in w else None
    if rate in w and cycles.notna().any():
        from_rate = w[rate].astype(float) * cycles
        count = from_rate if count is None else count.fillna(from_rate)
    return count


def _sass_flops(w: pd.DataFrame, cycles: pd.Series) -> dict[str, pd.Series]:
    out = {}
    for precision, p in SASS.items():
        got = {op: _count(w, _SASS_METRIC.format(p, op), cycles) for op in ("add", "mul", "fma")}
        if all(c is None for c in got.values()):
            continue
        get = {op: (c.fillna(0) if c is not None else 0.0) for op, c in got.items()}
        out[precision] = get["add"] + get["mul"] + 2 * get["fma"]
    return out


def launch_frame(pages: NcuPages) -> pd.DataFrame:
    """A row per profiled launch: FIELDS, FLOPs (total, per precision, source), ncu's own roofline FLOPs,
    DRAM bytes, and its rules' headline (the rule with the largest estimated speedup, and SOLBottleneck's)."""
    w = wide(pages)
    out = pd.DataFrame({"id": w.index, "kernel": w["kernel"], "block": w["block"], "grid": w["grid"],
                        "device": w["device"], "cc": w["cc"]}, index=w.index)
    for field, names in FIELDS.items():
        out[field] = _field(w, names)
    parts = _field(w, FIELDS["dram_read_bytes"]) + _field(w, FIELDS["dram_write_bytes"])
    # Without --metrics, the roofline section's rates: bytes/s and SASS ops per elapsed cycle (of an SMSP), each
    # over the launch's duration, as ncu's roofline turns them into throughput (cycles/s: smsp__cycles_elapsed)
    duration = out["duration_s"]
    out["dram_bytes"] = out["dram_bytes"].fillna(parts).fillna(_field(w, (DRAM_RATE,)) * duration)
    cycles = _field(w, ("smsp__cycles_elapsed.avg",)).fillna(_field(w, (CYCLE_RATE,)) * duration)
    tensor, sass = _tensor_flops(w), _sass_flops(w, cycles)
    zero = pd.Series(0.0, index=w.index)
    tensor_total = sum(tensor.values(), zero)
    sass_total = sum(sass.values(), zero)
    out["tensor_flops"] = tensor_total if tensor else math.nan
    out["ncu_roofline_flops"] = sass_total if sass else math.nan
    out["flops"] = (tensor_total + sass_total) if (tensor or sass) else math.nan
    out["flops_source"] = "tensor pipes + sass" if tensor else ("sass" if sass else "none")
    per = {**{p: s for p, s in sass.items()}}
    for p, s in tensor.items():
        per[p] = per.get(p, zero) + s
    out["precision"] = _dominant(per, w.index)
    for p, s in per.items():
        out[f"flops_{p}"] = s
    return _with_rules(out, pages.rules).reset_index(drop=True)


def _dominant(per: dict[str, pd.Series], index: pd.Index) -> pd.Series:
    if not per:
        return pd.Series(None, index=index, dtype=object)
    frame = pd.DataFrame(per)
    top = frame.idxmax(axis=1)
    return top.where(frame.max(axis=1) > 0, None)


def _with_rules(out: pd.DataFrame, rules: pd.DataFrame) -> pd.DataFrame:
    out = out.assign(rule=None, rule_speedup_pct=math.nan, rule_text=None, bottleneck=None)
    if not len(rules):
        return out
    timed = rules.dropna(subset=["speedup_pct"]).sort_values("speedup_pct", ascending=False, kind="stable")
    best = timed.drop_duplicates("id").set_index("id")
    has = out.index.isin(best.index)
    out.loc[has, "rule"] = best.loc[out.index[has], "rule"].values
    out.loc[has, "rule_speedup_pct"] = best.loc[out.index[has], "speedup_pct"].values
    out.loc[has, "rule_text"] = [first_sentence(t) for t in best.loc[out.index[has], "text"]]
    sol = rules[rules["rule"] == BOTTLENECK_RULE].drop_duplicates("id").set_index("id")
    has = out.index.isin(sol.index)
    out.loc[has, "bottleneck"] = [first_sentence(t) for t in sol.loc[out.index[has], "text"]]
    return out


def first_sentence(text: Any, limit: int = 200) -> str:
    """A rule's text in one line: its first sentence, cut at `limit` characters."""
    text = " ".join(str(text or "").split())
    end = re.search(r"(?<=[a-z0-9%)\]])\. ", text)
    one = text[: end.start() + 1] if end else text
    return one if len(one) <= limit else one[: limit - 1] + "…"


def rule_rows(pages: NcuPages) -> list[dict[str, Any]]:
    """Every rule of every launch, as rows for the record (text whole, speedup None where ncu gives none)."""
    return _records(pages.rules[["id", "kernel", "section", "rule", "type", "speedup_type", "speedup_pct", "text"]])


def launch_rows(pages: NcuPages) -> list[dict[str, Any]]:
    return _records(launch_frame(pages))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{k: (int(v) if k == "id" and v is not None else v) for k, v in r.items()} for r in rows]

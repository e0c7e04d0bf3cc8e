"""Model FLOPs per step, the dense peak throughput of common GPUs (for TFLOP/s and MFU), and speed of light.

FLOPs count the matmuls only (2 per multiply-add): the projections, the feed-forward, lm_head and the
two attention matmuls over the full (unmasked) score matrix, as is usual for MFU. Backward costs twice
the forward, so fwd_bwd and train count 3x the forward. The optimizer's FLOPs are negligible.

Speed of light is the time each phase of a step would take at the device's measured peaks.

A phase's floor is its matmul FLOPs at the measured dense matmul peak for the run's precision (the
forward's FLOPs, and twice them for the backward, as counted above), plus, for the optimizer,
the bytes AdamW must move at the measured memory bandwidth: it reads the parameters, the gradients and
both moment estimates and writes the parameters and both moments, 7 tensors of 4-byte fp32 values per
parameter (the model's parameters are fp32; autocast only changes the matmuls), or of 2-byte values with
bf16 weights (`--weights bf16`), whose gradients and AdamW state are bf16 too. `fraction` is floor /
measured median, so 1.0 would be a step at the speed of light. A phase measured faster than its floor
(fraction above BEATEN) proves the peaks too low, most often measured while something else held the
device: `beaten` names such phases, the worker drops cached peaks so the next run measures them again
(core.measure.device_peaks.refute_peaks), and no reader is shown a fraction above 100%.

The peaks are measured once per device in the worker (core.measure.device_peaks), never inside the timed steps:
a GPU's before the model is built, a CPU's after the last timed step, only the figures its summary needs.
They are cached here in the data directory keyed by device name, driver and torch version, so a new driver
or torch is measured again. `--peak-tflops` and `--peak-gbps` override them; `source` says which of
measured, cached or override each came from. A record whose run measured none says so (`source` "not
measured" and its `reason`), and its speed of light is absent, never held against other figures.

`gpu_busy_share` says how much of a step the GPU spent running kernels; a step below
HOST_BOUND_BELOW is named host-bound (see `busy_label`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from perfconsole.core.paths import data_dir
from perfconsole.core.settings import RunSpec
from perfconsole.core.stats import Stat

# Dense (no sparsity) peak TFLOP/s by precision class. "tf32" applies to fp32 with TF32 matmuls on.
# Sources: NVIDIA data sheets (SXM parts where the name does not say PCIe).
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.2},
    "H100 NVL": {"bf16": 835.5, "fp16": 835.5, "tf32": 417.8, "fp32": 59.8},
    "H100": {"bf16": 989.4, "fp16": 989.4, "tf32": 494.7, "fp32": 66.9},
    "H20": {"bf16": 148.0, "fp16": 148.0, "tf32": 74.0, "fp32": 44.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5},
    "A10G": {"bf16": 70.0, "fp16": 70.0, "tf32": 35.0, "fp32": 31.2},
    "A10": {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5, "fp32": 31.2},
    "L40S": {"bf16": 362.1, "fp16": 362.1, "tf32": 183.0, "fp32": 91.6},
    "L4": {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
    "RTX 5090": {"bf16": 209.5, "fp16": 209.5, "tf32": 104.8, "fp32": 104.8},
    "RTX 4090": {"bf16": 165.2, "fp16": 165.2, "tf32": 82.6, "fp32": 82.6},
    "RTX 3090": {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6, "fp32": 35.6},
    "V100": {"bf16": 0.0, "fp16": 125.0, "tf32": 15.7, "fp32": 15.7},
}


def peak_tflops(gpu_name: str | None, precision: str, tf32: bool) -> float | None:
    """The dense peak for this GPU and precision, or None where the GPU is not in the table."""
    if not gpu_name:
        return None
    key = "tf32" if precision == "fp32" and tf32 else precision
    # Longest match first, so "H100 PCIe" wins over "H100".
    for name in sorted(PEAK_TFLOPS, key=len, reverse=True):
        if name.lower() in gpu_name.lower():
            value = PEAK_TFLOPS[name].get(key)
            return value or None
    return None


def forward_flops(d_model: int, d_ff: int, n_layers: int, vocab_size: int, batch: int, ctx: int) -> float:
    tokens = batch * ctx
    per_layer_params = 4 * d_model * d_model + 3 * d_model * d_ff
    dense = 2.0 * tokens * (n_layers * per_layer_params + d_model * vocab_size)
    attention = n_layers * 2 * (2.0 * batch * ctx * ctx * d_model)  # QK^T and PV
    return dense + attention


def step_flops(mode: str, d_model: int, d_ff: int, n_layers: int, vocab_size: int, batch: int,
               ctx: int) -> float:
    fwd = forward_flops(d_model, d_ff, n_layers, vocab_size, batch, ctx)
    return fwd if mode == "fwd" else 3.0 * fwd


# --- speed of light ----------------------------------------------------------------------------
PEAKS_FILE = "peaks.json"
FLOPS_FILE = "flops.json"   # counted FLOPs per model, shape and batch (core.measure.model_build)
PEAK_KEYS = ("bf16", "fp16", "fp32", "tf32")
ADAMW_TENSORS = 7                 # read p, g, m, v; write p, m, v
# A share of the step with kernels running, measured (by the profiler, or NVML's utilisation), below which the
# GPU waited on the host.
HOST_BOUND_BELOW = 0.8
# The events give only a lower bound (see core.measure.pipeline.launch_step): the share of the step the GPU
# spent on work queued before the host finished issuing the step. Past one half, the host finished issuing
# with half the step's GPU work still queued: GPU-bound. A low bound names nothing: the host's issue time
# also holds its waits for the GPU (a full launch queue, a step in flight, a rank's exchange), so a GPU-bound
# step can read near 0 (2.7B bf16 DDP on 2x H100: 2-3 %, with NVML reading 75-100 % busy in the same steps).
GPU_BOUND_FROM_LOWER_BOUND = 0.5
# A phase this much faster than its floor refutes the peaks it was measured against (the margin leaves room
# for a clock that boosts a little past the one the peaks were measured at).
BEATEN = 1.05


@dataclass(frozen=True)
class Peaks:
    """A device's measured peaks: dense matmul TFLOP/s per precision key and copy bandwidth in GB/s."""
    device: str                         # the cache key: name, driver, torch
    matmul_tflops: dict[str, float]     # bf16, fp16, fp32, tf32 (fp32 with TF32 matmuls allowed)
    bandwidth_gbps: float               # device-to-device copy: bytes read + bytes written per second
    source: str = "measured"            # measured | cached
    # Where the copy's figure came from when not from `source`: a CPU measures one precision's matmul at a time
    # (core.measure.device_peaks), and a later precision's run measures its matmul beside the copy cached before.
    bandwidth_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Peaks:
        return cls(str(d["device"]), {k: float(v) for k, v in d["matmul_tflops"].items()},
                   float(d["bandwidth_gbps"]), str(d.get("source", "measured")), d.get("bandwidth_source"))


# Part of the cache key: a change to how core.measure.device_peaks measures makes every device measure again.
PEAKS_METHOD = 5


def cache_key(device_name: str, driver: str | None, torch_version: str) -> str:
    return f"{device_name} | driver {driver or 'none'} | torch {torch_version} | method {PEAKS_METHOD}"


def cached_peaks(key: str) -> Peaks | None:
    """The peaks cached for `key`, or None (no cache, another device, or a damaged file: measure again)."""
    try:
        doc = json.loads((data_dir() / PEAKS_FILE).read_text(encoding="utf-8"))
        return Peaks.from_dict({**doc[key], "source": "cached", "bandwidth_source": None})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save_peaks(peaks: Peaks) -> None:
    """Add `peaks` to the cache file, keeping other devices' entries; written atomically."""
    from perfconsole.core.store import write_atomic

    path = data_dir() / PEAKS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        doc = doc if isinstance(doc, dict) else {}
    except (OSError, ValueError):
        doc = {}
    doc[peaks.device] = {**peaks.to_dict(), "source": "measured", "bandwidth_source": None}
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def forget_peaks(key: str) -> bool:
    """Drop `key`'s cached peaks (others' stay), so the next run on that device measures again. True when
    an entry was removed."""
    from perfconsole.core.store import write_atomic

    path = data_dir() / PEAKS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(doc, dict) or doc.pop(key, None) is None:
        return False
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return True


def peak_key(spec: RunSpec) -> str:
    return "tf32" if spec.precision == "fp32" and spec.tf32 else spec.precision


def adamw_bytes(spec: RunSpec, model: dict[str, Any] | None = None) -> float:
    """`model` (the record's ev.ModelReady info) gives the parameter count of any model; else the builtin's."""
    d_model, d_ff, n_layers, _ = spec.dims()
    params = 2 * spec.vocab * d_model + n_layers * (4 * d_model**2 + 3 * d_model * d_ff + 2 * d_model) + d_model
    if model and model.get("params"):
        params = int(model["params"])
    # fp32 parameters (the default; autocast casts them for the matmuls) or bf16 ones, and AdamW's state with them.
    return float(ADAMW_TENSORS * (2 if spec.weights == "bf16" else 4) * params)


def floors_ms(spec: RunSpec, tflops: float, gbps: float, model: dict[str, Any] | None = None) -> dict[str, float | None]:
    """Each phase's floor in ms (None where the mode lacks it) and the total, their sum. `model` gives
    counted forward and backward FLOPs (core.measure.model_build) where the record has them."""
    d_model, d_ff, n_layers, _ = spec.dims()
    fwd = forward_flops(d_model, d_ff, n_layers, spec.vocab, spec.batch, spec.ctx) / (tflops * 1e9)
    bwd = 2 * fwd
    if model and model.get("forward_flops"):
        fwd, bwd = (float(model["forward_flops"]) / (tflops * 1e9), float(model["backward_flops"]) / (tflops * 1e9))
    out: dict[str, float | None] = {"forward_ms": fwd, "backward_ms": None, "optimizer_ms": None}
    if spec.mode != "fwd":
        out["backward_ms"] = bwd
    if spec.mode == "train":
        out["optimizer_ms"] = adamw_bytes(spec, model) / (gbps * 1e6)
    out["total_ms"] = sum(v for v in out.values() if v is not None)
    return out


def speed_of_light(spec: RunSpec, phases: dict[str, Stat | None], peaks: dict[str, Any] | None,
                   model: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """`{phase: {floor_ms, measured_ms, fraction}}` for total_ms and each phase the mode has, plus
    `peaks` (the figures used and where each came from). `phases` maps a phase to its statistics;
    measured_ms is the median. None without figures for both (`peaks` None, or a record's `not measured`,
    and no override for what is missing): no floor is shown rather than one of another precision."""
    figures = peaks_figures(peaks) or {}
    key = peak_key(spec)
    tflops, gbps = (figures.get("matmul_tflops") or {}).get(key), figures.get("bandwidth_gbps")
    tflops_src = figures.get("source", "measured")
    gbps_src = figures.get("bandwidth_source") or tflops_src
    if spec.peak_tflops:
        tflops, tflops_src = float(spec.peak_tflops), "override"
    if spec.peak_gbps:
        gbps, gbps_src = float(spec.peak_gbps), "override"
    if not tflops or not gbps:
        return None
    out: dict[str, Any] = {}
    for name, floor in floors_ms(spec, tflops, gbps, model).items():
        stat = phases.get(name)
        if floor is None or stat is None:
            continue
        out[name] = {"floor_ms": floor, "measured_ms": stat.median,
                     "fraction": floor / stat.median if stat.median > 0 else None}
    out["peaks"] = {"precision": key, "matmul_tflops": tflops, "matmul_source": tflops_src,
                    "bandwidth_gbps": gbps, "bandwidth_source": gbps_src, "device": figures.get("device")}
    # fp8 matmuls are held against the bf16 peak, which they can pass: for them a fraction above 1 proves nothing.
    out["beaten"] = [] if spec.fp8 else [name for name, v in out.items()
                                         if name != "peaks" and (v["fraction"] or 0) > BEATEN]
    return out


def peaks_figures(peaks: dict[str, Any] | None) -> dict[str, Any] | None:
    """A record's peaks where they hold figures; None where the run measured none (`source` not measured)."""
    return peaks if peaks and "matmul_tflops" in peaks else None


def peaks_text(peaks: dict[str, Any] | None) -> str:
    """Where a record's peaks came from, in words: `peaks: measured`, `cached`, or `not measured (why)`."""
    if not peaks:
        return "peaks: not measured (the run ended before its summary, or was saved before they were)"
    if peaks_figures(peaks) is None:
        return f"peaks: {peaks.get('source', 'not measured')} ({peaks.get('reason') or 'no reason given'})"
    copy = peaks.get("bandwidth_source")
    return f"peaks: {peaks.get('source', 'measured')}" + (f" (copy {copy})" if copy else "")


def sol_fraction(sol: dict[str, Any] | None, name: str = "total_ms") -> float | None:
    """`name`'s fraction of speed of light, None where unknown or where a beaten floor refutes the peaks."""
    if not sol or sol.get("beaten") or name not in sol:
        return None
    return sol[name]["fraction"]


def beaten_text(sol: dict[str, Any]) -> str | None:
    """One sentence, in figures, when a phase ran faster than its floor (see BEATEN); else None."""
    beaten = sol.get("beaten") or []
    if not beaten:
        return None
    name = "total_ms" if "total_ms" in beaten else beaten[0]
    ph, pk = sol[name], sol["peaks"]
    src = pk["matmul_source"] if pk["matmul_source"] == pk["bandwidth_source"] else \
        f"{pk['matmul_source']}, {pk['bandwidth_source']}"
    return (f"speed of light: the {name[:-3]} ran in {ph['measured_ms']:,.3f} ms, under its floor of "
            f"{ph['floor_ms']:,.3f} ms, so the peaks are too low ({pk['precision']} "
            f"{pk['matmul_tflops']:.4g} TFLOP/s, {pk['bandwidth_gbps']:.4g} GB/s, {src}): no fraction of them is shown")


def busy_label(share: float | None, source: str | None) -> str | None:
    """'host-bound' or 'gpu-bound' for a step's gpu_busy_share, None where it is not known."""
    if share is None:
        return None
    if source in ("profile", "nvml"):
        return "host-bound" if share < HOST_BOUND_BELOW else "gpu-bound"
    return "gpu-bound" if share >= GPU_BOUND_FROM_LOWER_BOUND else None

"""Model FLOPs per step and the dense peak throughput of common GPUs, for TFLOP/s and MFU.

FLOPs count the matmuls only (2 per multiply-add): the projections, the feed-forward, lm_head and the
two attention matmuls over the full (unmasked) score matrix, as is usual for MFU. Backward costs twice
the forward, so fwd_bwd and train count 3x the forward. The optimizer's FLOPs are negligible.
"""
from __future__ import annotations

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

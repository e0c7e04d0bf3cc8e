"""`--sdpa-kernel`: which kernel torch's scaled_dot_product_attention runs in this process; `--sdpa-causal`: an hf:
model's attention as SDPA's causal flag, with no mask tensor, under torch.compile too.

torch picks among FlashAttention-2 (flash), cuDNN's fused attention (cudnn), the memory-efficient kernel
(efficient) and the math fallback by its own priority and what each supports. On a Hopper GPU it picks cuDNN's
for bf16 causal attention; for Llama-3.2-1B's heads (64 wide) that kernel's backward ran at 35 % of the bf16 peak
on an H200 (docs/results/llama1B_why_h200.md), so the choice is worth a setting. A chosen kernel is the only one
left on: where it cannot take the shape, the first attention call raises torch's own reason instead of falling
back quietly. torch.compile reads the same switches when it traces, so compiled models follow them too.

transformers gives SDPA `is_causal=True` and no mask where it can tell that a batch is neither padded nor packed
(several sequences in one row). Under torch.compile it cannot: whether the position ids hold packed sequences is a
value it may not read while tracing (transformers.masking_utils.find_packed_sequence_indices), and before torch
2.14 (pytorch#176499) dynamo also answers `is_exporting()` True while compiling. So a compiled hf: model attends
through a dense (batch, 1, ctx, ctx) boolean mask: every kernel computes the masked half too, and FlashAttention
cannot run at all. perfconsole's batches are one unpadded sequence a row and it never exports, so `--sdpa-causal`
tells transformers both, for this process: the same attention, on the causal kernels. The builtin model passes
is_causal itself.
"""
from __future__ import annotations

import torch
from torch import nn

from perfconsole.core.measure import Unsupported

_CUDA = torch.backends.cuda
# each kernel: (the switch that turns it on or off, the question whether it is on)
KERNELS = {"flash": (_CUDA.enable_flash_sdp, _CUDA.flash_sdp_enabled),
           "cudnn": (_CUDA.enable_cudnn_sdp, _CUDA.cudnn_sdp_enabled),
           "efficient": (_CUDA.enable_mem_efficient_sdp, _CUDA.mem_efficient_sdp_enabled),
           "math": (_CUDA.enable_math_sdp, _CUDA.math_sdp_enabled)}
SWITCHES = {name: switch for name, (switch, _) in KERNELS.items()}


def apply(value: str, model: nn.Module) -> str:
    """Leave `value`'s kernel the only one on (auto: torch's own choice, nothing changed); returns it."""
    if value != "auto":
        for name, switch in SWITCHES.items():
            switch(name == value)
    return value


def enabled() -> dict[str, bool]:
    """Which kernels are on now."""
    return {name: on() for name, (_, on) in KERNELS.items()}


def _never_exporting() -> bool:
    return False


def _one_sequence_a_row(position_ids: torch.Tensor) -> None:
    return None


PATCHED = {"is_torchdynamo_exporting": _never_exporting, "find_packed_sequence_indices": _one_sequence_a_row}


def causal(value: bool, model: nn.Module) -> bool:
    """With `value`, transformers' mask builders in this process take it that no batch is packed and nothing is
    exported (see above). Unsupported where this transformers has other mask builders: nothing is changed then,
    rather than a setting that quietly does nothing."""
    if value:
        import transformers
        import transformers.masking_utils as masking

        missing = [name for name in PATCHED if not callable(getattr(masking, name, None))]
        if missing:
            raise Unsupported(f"sdpa causal: transformers {transformers.__version__} has no "
                              f"masking_utils.{' or '.join(missing)}, the mask builders it tells (transformers 5)")
        for name, stand_in in PATCHED.items():
            setattr(masking, name, stand_in)
    return value

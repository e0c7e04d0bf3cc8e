"""The ladder's rungs: two sequences, each rung the one before it plus one change.

`RUNGS` climbs one process from eager to fp8 (core.grids.ladder); its `sdpa-causal` rung is for hf: models
alone (`Rung.models`). `DP_RUNGS` climbs a data-parallel job (`ladder --nproc N`): from DDP's defaults through
the settings that decide how much the gradients' collectives carry and how much of them the backward hides
(bucket size, gradients as bucket views, the bf16 hook, bf16 weights, torch.compile with DDP's graph splitting,
compiled autograd with DDP's all-reduces in the backward's graph (opt-in: experimental in torch), ZeRO-1's sharded
optimizer (opt-in: memory for time), NCCL's streams at high priority, ZeRO-2 in DDP's comm hook (opt-in)),
then FSDP2 with and without resharding and with bf16 gathers.
Each data-parallel rung runs with its one-process program first (`scaling`), so its weak scaling is against
the same model, batch and settings on one GPU (bf16 weights and compile change that program too).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfconsole.core.settings import RunSpec
from perfconsole.core.settings.rules import why_not


@dataclass(frozen=True)
class Rung:
    name: str
    change: dict[str, Any]      # the RunSpec fields this rung sets, on top of the rung before it
    what: str                   # the change, in words
    needs: str = ""             # what it needs beyond torch, in words
    same_numerics: bool = True  # False where the change rounds differently on purpose (its name says so)
    opt_in: bool = False        # run only when --rungs names it: a trade of time for memory, or torch's experimental
    models: tuple[str, ...] = ()  # the model kinds it applies to (model.sources: builtin, hf, factory); () all

    def ruled_out(self, below: RunSpec) -> str | None:
        """Why the spec below this rung (the one its change is made to) rules the change out: a rule between
        settings (core.settings.rules.why_not) that the change breaks, in its words; None where it can run as far
        as the spec alone can tell."""
        return why_not(below, **self.change)


# The first rung sets every knob the later ones turn, so the ladder starts from the same program
# whatever the base spec says.
RUNGS: tuple[Rung, ...] = (
    Rung("eager", {"attention": "naive", "sdpa_kernel": "auto", "sdpa_causal": False, "compile": False,
                   "compile_mode": "default", "optimizer": "forloop", "kernels": "torch", "fp8": False,
                   "weights": "fp32"}, "eager, naive attention, for-loop AdamW"),
    Rung("sdpa", {"attention": "sdpa"}, "scaled_dot_product_attention (flash / memory-efficient kernels)"),
    Rung("compile", {"compile": True}, "torch.compile of the model"),
    Rung("sdpa-causal", {"sdpa_causal": True}, "an hf: model's attention on SDPA's causal kernels under "
         "torch.compile, not through a dense ctx x ctx mask (docs/models.md)", models=("hf",)),
    Rung("fused-adamw", {"optimizer": "fused"}, "fused AdamW: one kernel for all parameters"),
    Rung("cuda-graphs", {"compile_mode": "reduce-overhead"}, "CUDA graphs (compile mode reduce-overhead)",
         "device cuda"),
    Rung("bf16-weights", {"weights": "bf16"}, "bf16 parameters, gradients and AdamW state (no fp32 master copy)",
         "precision bf16", same_numerics=False),
    Rung("liger", {"kernels": "liger"}, "liger-kernel fused SwiGLU and cross-entropy (and RMSNorm when not compiled)",
         "device cuda, perfconsole[fast]"),
    Rung("fp8", {"fp8": True}, "torchao float8 matmuls", "compute capability >= 8.9, perfconsole[fast]",
         same_numerics=False),
    Rung("checkpoint", {"checkpoint": "blocks"}, "activation checkpointing of each block: less memory, more time",
         opt_in=True),
)

# The DDP settings a rung turns; the FSDP rung sets them back, since they are DDP's alone (and the weights to
# fp32: FSDP's own bf16 rung casts an fp32 master copy).
_DDP_KNOBS = {"bucket_mb": None, "grad_as_bucket_view": False, "comm_hook": "none", "optimize_ddp": "ddp_optimizer",
              "zero": False, "zero2": False}

# The first rung sets every data-parallel knob and the one-process settings the ladder keeps fixed
# (sdpa, fused AdamW, eager), so every rung means the same program whatever the base says.
DP_RUNGS: tuple[Rung, ...] = (
    Rung("ddp", {"parallel": "ddp", **_DDP_KNOBS, "reshard": True, "fsdp_bf16": False, "nccl_priority": False,
                 "compile": False, "compile_mode": "default", "attention": "sdpa", "optimizer": "fused", "kernels": "torch",
                 "fp8": False, "scaling": True},
         "DistributedDataParallel with its defaults: 25 MB buckets, each all-reduced once its gradients are ready"),
    Rung("bucket-100", {"bucket_mb": 100.0}, "100 MB gradient buckets: fewer, larger all-reduces"),
    Rung("bucket-view", {"grad_as_bucket_view": True},
         "gradients as views into DDP's buckets: no copy into the buckets, one gradient-sized buffer less"),
    Rung("bf16-hook", {"comm_hook": "bf16"}, "gradients all-reduced in bf16 (bf16_compress_hook): half the bytes",
         same_numerics=False),
    Rung("bf16-weights", {"weights": "bf16", "comm_hook": "none"}, "bf16 parameters, gradients and AdamW state (no "
         "fp32 master copy): the all-reduce carries bf16 without a hook", "precision bf16", same_numerics=False),
    Rung("compile", {"compile": True},
         "torch.compile, the graph split at DDP's buckets (DDPOptimizer) so their all-reduces start in the backward"),
    Rung("compiled-autograd", {"optimize_ddp": "python_reducer"}, "compiled autograd traces the backward with "
         "DDP's all-reduces in its graph (DDP's Python reducer): inductor buckets them among the backward's kernels, "
         "no graph split", opt_in=True),
    Rung("zero", {"zero": True}, "ZeRO-1: AdamW's state sharded over the ranks (ZeroRedundancyOptimizer), each "
         "rank's shard broadcast after its step: less memory, a broadcast more", opt_in=True),
    Rung("nccl-priority", {"nccl_priority": True}, "NCCL's streams at high priority: the all-reduces' kernels take "
         "SMs ahead of the backward's queued kernels, so more of them hide behind it", "device cuda"),
    Rung("zero2", {"zero2": True}, "ZeRO-2 in DDP's comm hook: each bucket's gradients reduce-scattered (half the "
         "all-reduce's bytes), AdamW on each rank's slice, the parameters all-gathered after it: a world-th of "
         "AdamW's work and state, a gather more, a flat copy of the parameters more", opt_in=True),
    Rung("fsdp", {"parallel": "fsdp", **_DDP_KNOBS, "compile": False, "weights": "fp32"},
         "FSDP2 fully_shard per block: fp32 parameters, gradients and AdamW state sharded; eager"),
    Rung("no-reshard", {"reshard": False},
         "FSDP blocks kept gathered from forward to backward: one all-gather per block fewer, more memory"),
    Rung("fsdp-bf16", {"fsdp_bf16": True}, "FSDP mixed precision: parameters gathered and gradients "
         "reduce-scattered in bf16, half the bytes", "precision bf16", same_numerics=False),
)


def rung_set(base: RunSpec) -> tuple[Rung, ...]:
    """The rungs a ladder of this base climbs: the data-parallel ones for a job of several processes; a rung
    for other kinds of model (`models`) is not one of them."""
    return tuple(r for r in (DP_RUNGS if base.nproc > 1 else RUNGS) if not r.models or base.model_kind in r.models)


def default_rungs(base: RunSpec) -> tuple[str, ...]:
    return tuple(r.name for r in rung_set(base) if not r.opt_in)


def for_other_models(name: str, base: RunSpec) -> str | None:
    """Why a rung of the other sequences' names is not on this base's ladder: it is for other kinds of model."""
    models = next((r.models for r in (*RUNGS, *DP_RUNGS) if r.name == name), ())
    if not models or base.model_kind in models:
        return None
    kinds = " and ".join(f"{m}:" if m == "hf" else m for m in models)
    return f"{name} is a rung for {kinds} models, not for a {base.model_kind} model"


def not_applicable(name: str, base: RunSpec) -> str | None:
    """Why a rung cannot apply to the base's model at all (its change is then not carried up), or None.
    A factory's attention and layers are its own: no attention switch, no liger patch."""
    if base.nproc > 1 or base.model_kind != "factory":
        return None
    if name == "sdpa":
        return "unsupported: a factory model's attention is its own code (--attention does not reach it)"
    if name == "liger":
        return "unsupported: liger patches the builtin model and hf: architectures; a factory's layers are its own"
    return None

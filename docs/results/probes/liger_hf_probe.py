"""Which of liger-kernel's patches faults on an hf Llama 3.2-1B shape (2 layers, 128,256-token vocabulary),
bf16 autocast train step, batch 4, ctx 2048: each variant in its own process (a CUDA fault ends a process).

    CUDA_LAUNCH_BLOCKING=1 python3 docs/results/probes/liger_hf_probe.py            # every variant, one line each
"""
import subprocess
import sys

VARIANTS = ["none", "rms_norm", "swiglu", "cross_entropy_on_logits", "all_but_ce", "rope"]


def one(variant: str) -> None:
    import torch
    import torch.nn.functional as F
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=2, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True,
                      max_position_embeddings=2048, attn_implementation="sdpa")
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    import liger_kernel.transformers as lk
    from liger_kernel.transformers import LigerCrossEntropyLoss
    flags = {"rope": variant == "rope", "rms_norm": variant in ("rms_norm", "all_but_ce"),
             "swiglu": variant in ("swiglu", "all_but_ce"), "cross_entropy": False,
             "fused_linear_cross_entropy": False}
    lk.apply_liger_kernel_to_llama(model=model, **flags)
    ids = torch.randint(0, 10000, (4, 2048), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids).logits
    flat, tgt = logits.reshape(-1, logits.shape[-1]), ids.reshape(-1)
    if variant == "cross_entropy_on_logits":
        print("logits", logits.dtype, tuple(logits.shape), logits.is_contiguous(), flush=True)
        loss = LigerCrossEntropyLoss()(flat, tgt)
    else:
        loss = F.cross_entropy(flat.float(), tgt)
    loss.backward()
    torch.cuda.synchronize()
    print("ok", float(loss))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one(sys.argv[1])
    else:
        for v in VARIANTS:
            p = subprocess.run([sys.executable, __file__, v], capture_output=True, text=True, timeout=120)
            err = [line for line in p.stderr.splitlines() if "Error" in line or "error" in line][-1:]
            print(f"{v}: exit {p.returncode} {p.stdout.strip().splitlines()[-1:] } {err}", flush=True)

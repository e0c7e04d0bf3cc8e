"""Kernel categories (core.profiling.categories) on real names from the fixtures, and on torch's and
Triton's names."""
from __future__ import annotations


import pytest

from perfconsole.core.profiling.categories import CATEGORIES, categorize
from perfconsole.core.profiling.load import load_profile
from helpers import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "nsys"


def _names(rel: str) -> list[str]:
    return [r["name"] for r in load_profile(FIXTURES / rel)[0]["cuda_gpu_kern_sum"]]


ALL = _names("gpa/paddle_static_gpukernsum.csv") + _names("gpa/demo_cuda_gpu_kern_sum.csv") + \
    _names("gpa/llama2-70B-GBS512-FSDP256_cuda_gpu_kern_sum.csv") + _names("moeresearch/AT_OFF_CG_OFF_cuda_gpu_kern_sum.csv")


def _find(prefix: str) -> str:
    return next(n for n in ALL if n.startswith(prefix))


@pytest.mark.parametrize("prefix,category", [
    ("ampere_fp16_s16816gemm", "matmul"),
    ("sm90_xmma_gemm_bf16bf16", "matmul"),
    ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "matmul"),
    ("void cublasLt::splitKreduce_kernel", "matmul"),
    ("void splitKreduce_kernel", "matmul"),
    ("void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm", "matmul"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal", "matmul"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90", "attention"),
    ("cudnn_generated_fmha_knob", "attention"),
    ("void at::native::<unnamed>::cunn_SoftMaxForward", "softmax"),
    ("void paddle::operators::WarpSoftmaxForward", "softmax"),
    ("void paddle::operators::LayerNormForward", "normalization"),
    ("void vllm::rms_norm_kernel", "normalization"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor", "elementwise"),
    ("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, at::native::ArgMaxOps", "reduction"),
    ("void cub::DeviceReduceSingleTileKernel", "reduction"),
    ("void paddle::operators::AdamKernelREG", "optimizer"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda", "memory"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>", "memory"),
    ("ncclKernel_ReduceScatter_RING_LL_Sum", "communication"),
    ("ncclDevKernel_AllGather_RING_LL", "communication"),
    ("void tensorrt_llm::kernels::cutlass_kernels::expandInputRowsKernel", "other"),  # Gemm only in template args
    ("void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel", "elementwise"),  # lambda != lamb
])
def test_categorize_real_names(prefix: str, category: str) -> None:
    assert categorize(_find(prefix)) == category


@pytest.mark.parametrize("name,category", [
    ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>>(...)", "optimizer"),
    ("[CUDA memcpy Device-to-Host]", "memory"),
    ("triton_poi_fused_add_mul_0", "elementwise"),
    ("triton_red_fused_sum_1", "reduction"),
    ("triton_per_fused__softmax_2", "softmax"),
    ("triton_tem_fused_addmm_3", "matmul"),
    ("aten::mm", "matmul"), ("aten::_softmax", "softmax"), ("aten::mul", "elementwise"),
    ("aten::_foreach_mul_", "optimizer"), ("aten::copy_", "memory"), ("aten::sum", "reduction"),
    ("aten::norm", "reduction"), ("aten::native_layer_norm", "normalization"),
    ("aten::scaled_dot_product_attention", "attention"),
])
def test_categorize_torch_and_triton_names(name: str, category: str) -> None:
    assert categorize(name) == category


def test_every_fixture_kernel_gets_a_known_category() -> None:
    assert {categorize(n) for n in ALL} <= set(CATEGORIES)

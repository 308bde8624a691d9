"""Verdicts equal the C++ Torch/ suites' on the same cases and seeds: PyTorch's SDPA (math and flash backends forced),
linear and HF RMSNorm called from Python through kvconf give the same error and bound, bit for bit, as the same
libtorch kernels registered in C++ (kernels/torch) in conformance_torch_*_test. The C++ programs are run here with
--gtest_output=xml and their recorded properties (17 significant digits) compared with the Python results."""
import pytest
import torch
from torch.nn.attention import SDPBackend

import kvconf
from cxx_suites import SUITES, compare, gtest_filters, run_suite, sanitize
from linear_and_rmsnorm import linear, rms_norm
from sdpa_attention import forced, no_softcap, sdpa_batched_decode

pytestmark = pytest.mark.skipif(not SUITES, reason="KVCONF_SUITES_DIR (set by CTest) names the C++ suites' folder")

ATTENTION_IDS = ["q16_kv128_d128_h8_gqa4_causal_win0_cap0_sc0_normal",
                 "q1_kv512_d128_h8_gqa4_causal_win0_cap0_sc0_normal",
                 "q12_kv80_d64_h4_gqa1_noncausal_win16_cap0_sc0_normal"]


def cxx_names(cxx, *suites):
    """The C++ test cases of kernel `cxx` on ATTENTION_IDS in `suites`: asked of a suite program together."""
    return gtest_filters("Torch", cxx, ATTENTION_IDS, *suites)


@pytest.mark.parametrize("backend, cxx, dtype", [
    (SDPBackend.MATH, "torch_attn_sdpa_math_f32", torch.float32),
    (SDPBackend.MATH, "torch_attn_sdpa_math_f16", torch.float16),
    (SDPBackend.FLASH_ATTENTION, "torch_attn_sdpa_flash_bf16", torch.bfloat16),
])
@pytest.mark.parametrize("case_id", ATTENTION_IDS)
def test_attention_matches_the_torch_suites(backend, cxx, dtype, case_id):
    k = kvconf.AttentionKernel(forced(backend), dtype=dtype, exp_error_ulps=20, supports=no_softcap)
    case = kvconf.attention_case(case_id)
    name = f"Torch/AttentionConformance.*/{cxx}__{sanitize(case_id)}"
    compare(kvconf.check_attention(k, case, rules=["oracle"]),
            run_suite("conformance_torch_attention_oracle_test", name, cxx_names(cxx, "AttentionConformance")))
    compare(kvconf.check_attention(k, case, rules=["on_off", "chunked", "unused_slots"]),
            run_suite("conformance_torch_attention_cache_test", name,
                      cxx_names(cxx, "AttentionConformance", "AttentionBatchInvariance")))


@pytest.mark.parametrize("cxx, dtype", [("torch_attn_sdpa_math_f32", torch.float32),
                                        ("torch_attn_sdpa_math_f16", torch.float16)])
@pytest.mark.parametrize("case_id", ATTENTION_IDS)
def test_batched_decode_matches_the_torch_suites(cxx, dtype, case_id):
    """The batch rule with sdpa_batched_decode (left-padded, as the C++ kernels' sdpa_batch) against
    Torch/AttentionBatchInvariance: the same error and bound for the row decoded alone vs inside 4 and 64 sequences."""
    k = kvconf.AttentionKernel(forced(SDPBackend.MATH), dtype=dtype, exp_error_ulps=20, supports=no_softcap,
                               batch_fn=forced(SDPBackend.MATH, sdpa_batched_decode))
    compare(kvconf.check_attention(k, kvconf.attention_case(case_id), rules=["batch"]),
            run_suite("conformance_torch_attention_cache_test",
                      f"Torch/AttentionBatchInvariance.*/{cxx}__{sanitize(case_id)}",
                      cxx_names(cxx, "AttentionConformance", "AttentionBatchInvariance")))


@pytest.mark.parametrize("dtype, suffix", [(torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16")])
def test_linear_and_norm_match_the_torch_suites(dtype, suffix):
    g = kvconf.GemmKernel(linear, dtype=dtype)
    gemm_cases = kvconf.gemm_cases("default")[:3]
    gemm_names = [f"Torch/*/torch_gemm_linear_{suffix}__{sanitize(c.id)}" for c in gemm_cases]
    for case, name in zip(gemm_cases, gemm_names):
        compare(kvconf.check_gemm(g, case), run_suite("conformance_torch_gemm_test", name, gemm_names))
    case = kvconf.projection_cases("default")[0]
    compare(kvconf.check_projection(g, case), run_suite(
        "conformance_torch_projection_test", f"Torch/*/torch_gemm_linear_{suffix}__{sanitize(case.id)}"))
    n = kvconf.NormKernel(rms_norm, dtype=dtype)
    norm_cases = kvconf.norm_cases("default")[:2]
    norm_names = [f"Torch/*/torch_norm_hf_rms_{suffix}__{sanitize(c.id)}" for c in norm_cases]
    for case, name in zip(norm_cases, norm_names):
        compare(kvconf.check_norm(n, case), run_suite("conformance_torch_norm_test", name, norm_names))

/* The example plugin's entry points: its kernel table (fp32 and fp16 GEMM and attention, fp32 and bf16 RMSNorm) and
 * the two exported functions of include/kvconf/plugin.h. Built with KVCONF_EXAMPLE_WRONG, the same functions with
 * planted bugs make libkvconf_example_wrong.so (fp16 accumulation in a GEMM; decode attention dropping the newest
 * cache row), which the conformance checks must catch (tests/plugin/plugin_example_test.cpp). */
#include "example_kernels.h"

/* Positional: name, kind, in, acc, out, cache_invariant, deterministic, exp_error_ulps, mirrors, user, the six
 * functions, then (ABI version 2) pv_acc (0 = acc) and flags. */
#define EX_KERNEL_ACC(NAME, KIND, IN, ACC, OUT, VAR, GEMM, NORM, ATTN, ATTN_SUPPORTS, MIRRORS) \
  { NAME, KIND, IN, ACC, OUT, 0, 1, 0, MIRRORS, (void*)(VAR), GEMM, NULL, NORM, NULL, ATTN, ATTN_SUPPORTS, 0, 0 }
#define EX_KERNEL(NAME, KIND, IN, OUT, VAR, GEMM, NORM, ATTN, ATTN_SUPPORTS, MIRRORS) \
  EX_KERNEL_ACC(NAME, KIND, IN, KVCONF_FP32, OUT, VAR, GEMM, NORM, ATTN, ATTN_SUPPORTS, MIRRORS)

#if !defined(KVCONF_EXAMPLE_WRONG)
static struct ex_variant correct = {0, 0};
static struct ex_variant acc16 = {1, 0};
static const struct kvconf_kernel_desc kernels[] = {
    EX_KERNEL("gemm.f32", KVCONF_KIND_GEMM, KVCONF_FP32, KVCONF_FP32, &correct, ex_gemm, NULL, NULL, NULL,
              "example: sequential fp32 dot products"),
    EX_KERNEL("gemm.f16", KVCONF_KIND_GEMM, KVCONF_FP16, KVCONF_FP16, &correct, ex_gemm, NULL, NULL, NULL,
              "example: fp16 in/out, fp32 accumulation"),
    EX_KERNEL("norm.f32", KVCONF_KIND_NORM, KVCONF_FP32, KVCONF_FP32, &correct, NULL, ex_norm, NULL, NULL,
              "example: HF RMSNorm in fp32"),
    EX_KERNEL("norm.bf16", KVCONF_KIND_NORM, KVCONF_BF16, KVCONF_BF16, &correct, NULL, ex_norm, NULL, NULL,
              "example: HF RMSNorm, bf16 in/out"),
    EX_KERNEL("attn.two_pass.f32", KVCONF_KIND_ATTENTION, KVCONF_FP32, KVCONF_FP32, &correct, NULL, NULL, ex_attention,
              ex_attention_supports, "example: two-pass softmax attention in fp32"),
    EX_KERNEL("attn.two_pass.f16", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP16, &correct, NULL, NULL, ex_attention,
              ex_attention_supports, "example: two-pass softmax attention, fp16 in/out"),
    /* The wrong plugin's fp16-accumulating GEMM, declared as it computes (acc = KVCONF_FP16): not a bug. */
    EX_KERNEL_ACC("gemm.acc16.f16", KVCONF_KIND_GEMM, KVCONF_FP16, KVCONF_FP16, KVCONF_FP16, &acc16, ex_gemm, NULL,
                  NULL, NULL, "example: fp16 in/out, fp16 accumulation, declared"),
};
#else
static struct ex_variant acc16 = {1, 0};
static struct ex_variant drop_row = {0, 1};
static const struct kvconf_kernel_desc kernels[] = {
    EX_KERNEL("gemm.acc16.f16", KVCONF_KIND_GEMM, KVCONF_FP16, KVCONF_FP16, &acc16, ex_gemm, NULL, NULL, NULL,
              "planted bug: claims fp32 accumulation, accumulates in fp16"),
    EX_KERNEL("attn.drop_last_row.f16", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP16, &drop_row, NULL, NULL,
              ex_attention, NULL, "planted bug: decode calls never read the newest cache row"),
};
#endif

KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void) { return KVCONF_PLUGIN_ABI_VERSION; }

KVCONF_PLUGIN_EXPORT int kvconf_plugin_register(const struct kvconf_host* host, struct kvconf_plugin* out, char* err,
                                                size_t err_size) {
  if (host->abi_version != KVCONF_PLUGIN_ABI_VERSION) {
    snprintf(err, err_size, "built for ABI %u, host speaks %u", KVCONF_PLUGIN_ABI_VERSION, host->abi_version);
    return 1;
  }
  out->abi_version = KVCONF_PLUGIN_ABI_VERSION;
  out->n_kernels = (uint32_t)(sizeof kernels / sizeof kernels[0]);
  out->kernels = kernels;
  return 0;
}

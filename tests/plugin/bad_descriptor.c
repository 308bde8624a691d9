/* Test plugins with one bad kernel descriptor each, chosen by a compile definition (tests/plugin/CMakeLists.txt):
 * BAD_FORMAT (in = 7), EMPTY_NAME, DUPLICATE_NAME, NULL_RUN, and version 2's fields: NARROW_ACC (fp32 inputs summed
 * in fp16), GEMM_PV_ACC (a P·V accumulator on a GEMM), BAD_PV_ACC (pv_acc = 9), BAD_FLAGS (flags = 2),
 * FLAG_ON_GEMM (KVCONF_FLAG_EXP2_SCALE on a GEMM). kvconf must refuse each naming the field. EXP2_SCALE is a good
 * one: two attention kernels, "attn" without flags and "attn_exp2" with KVCONF_FLAG_EXP2_SCALE. */
#include "kvconf/plugin.h"

static int gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, size_t err_size) {
  (void)user, (void)x, (void)w, (void)y, (void)err, (void)err_size;
  return 0;
}

#define DESC(NAME, KIND, IN, ACC, RUN, ATTN, PV_ACC, FLAGS) \
  { NAME, KIND, IN, ACC, KVCONF_FP32, 0, 1, 0, NULL, NULL, RUN, NULL, NULL, NULL, ATTN, NULL, PV_ACC, FLAGS }
#define GEMM_DESC(NAME, IN, RUN) DESC(NAME, KVCONF_KIND_GEMM, IN, KVCONF_FP32, RUN, NULL, 0, 0)

static int attention(void* user, const DLTensor* q, const DLTensor* k, const DLTensor* v, DLTensor* o,
                     const struct kvconf_attention_params* p, char* err, size_t err_size) {
  (void)user, (void)q, (void)k, (void)v, (void)o, (void)p, (void)err, (void)err_size;
  return 0;
}

static const struct kvconf_kernel_desc kernels[] = {
    GEMM_DESC("ok", KVCONF_FP32, gemm),
#if defined(BAD_FORMAT)
    GEMM_DESC("gemm", 7, gemm),
#elif defined(EMPTY_NAME)
    GEMM_DESC("", KVCONF_FP32, gemm),
#elif defined(DUPLICATE_NAME)
    GEMM_DESC("ok", KVCONF_FP32, gemm),
#elif defined(NULL_RUN)
    GEMM_DESC("gemm", KVCONF_FP32, NULL),
#elif defined(NARROW_ACC)
    DESC("gemm", KVCONF_KIND_GEMM, KVCONF_FP32, KVCONF_FP16, gemm, NULL, 0, 0),
#elif defined(GEMM_PV_ACC)
    DESC("gemm", KVCONF_KIND_GEMM, KVCONF_FP16, KVCONF_FP32, gemm, NULL, KVCONF_FP16, 0),
#elif defined(BAD_PV_ACC)
    DESC("attn", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP32, NULL, attention, 9, 0),
#elif defined(BAD_FLAGS)
    DESC("attn", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP32, NULL, attention, 0, 2),
#elif defined(FLAG_ON_GEMM)
    DESC("gemm", KVCONF_KIND_GEMM, KVCONF_FP16, KVCONF_FP32, gemm, NULL, 0, KVCONF_FLAG_EXP2_SCALE),
#elif defined(EXP2_SCALE)
    DESC("attn", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP32, NULL, attention, 0, 0),
    DESC("attn_exp2", KVCONF_KIND_ATTENTION, KVCONF_FP16, KVCONF_FP32, NULL, attention, 0, KVCONF_FLAG_EXP2_SCALE),
#endif
};

KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void) { return KVCONF_PLUGIN_ABI_VERSION; }

KVCONF_PLUGIN_EXPORT int kvconf_plugin_register(const struct kvconf_host* host, struct kvconf_plugin* out, char* err,
                                                size_t err_size) {
  (void)host, (void)err, (void)err_size;
  out->abi_version = KVCONF_PLUGIN_ABI_VERSION;
  out->n_kernels = (uint32_t)(sizeof kernels / sizeof kernels[0]);
  out->kernels = kernels;
  return 0;
}

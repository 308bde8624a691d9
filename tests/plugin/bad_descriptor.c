/* Test plugins with one bad kernel descriptor each, chosen by a compile definition (tests/plugin/CMakeLists.txt):
 * BAD_FORMAT (in = 7), EMPTY_NAME, DUPLICATE_NAME, NULL_RUN. kvconf must refuse each naming the field. */
#include "kvconf/plugin.h"

static int gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, size_t err_size) {
  (void)user, (void)x, (void)w, (void)y, (void)err, (void)err_size;
  return 0;
}

#define GEMM_DESC(NAME, IN, RUN) \
  { NAME, KVCONF_KIND_GEMM, IN, KVCONF_FP32, KVCONF_FP32, 0, 1, 0, NULL, NULL, RUN, NULL, NULL, NULL, NULL, NULL }

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

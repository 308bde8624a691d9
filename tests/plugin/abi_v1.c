/* Test plugin built as a version-1 plugin: it returns ABI version 1 and its table is struct kvconf_kernel_desc_v1
 * (no pv_acc, no flags). kvconf still reads it: "ok" (fp32 GEMM) registers and runs; with V1_FP16_ACC a second
 * descriptor declares acc = KVCONF_FP16, which version 1 cannot say, and kvconf refuses it naming the field. */
#include <stddef.h>

#include "kvconf/plugin.h"
#include "sequential_gemm.h"

/* y = x·Wᵀ, fp32 in and out, sequential fp32 sums. */
static int gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, size_t err_size) {
  (void)user, (void)err, (void)err_size;
  if (x->data == NULL) return 0; /* supports: every call */
  sequential_gemm(x, w, y);
  return 0;
}

#define V1_GEMM(NAME, ACC) \
  { NAME, KVCONF_KIND_GEMM, KVCONF_FP32, ACC, KVCONF_FP32, 0, 1, 0, NULL, NULL, gemm, NULL, NULL, NULL, NULL, NULL }

static const struct kvconf_kernel_desc_v1 kernels[] = {
    V1_GEMM("ok", KVCONF_FP32),
#if defined(V1_FP16_ACC)
    V1_GEMM("acc16", KVCONF_FP16),
#endif
};

KVCONF_PLUGIN_EXPORT uint32_t kvconf_plugin_abi_version(void) { return 1u; }

KVCONF_PLUGIN_EXPORT int kvconf_plugin_register(const struct kvconf_host* host, struct kvconf_plugin* out, char* err,
                                                size_t err_size) {
  (void)err, (void)err_size;
  if (host->abi_version != 1u) return 1; /* a version-1 plugin checks the host reads it at version 1 */
  out->abi_version = 1u;
  out->n_kernels = (uint32_t)(sizeof kernels / sizeof kernels[0]);
  out->kernels = (const struct kvconf_kernel_desc*)(const void*)kernels; /* version 1's layout, as version 1 built it */
  return 0;
}

/* Test plugin: fp32 GEMM kernels that misbehave in the middle of a run, when k >= 512 (smaller calls compute
 * correctly, so the worker is seen to survive and restart): segv (writes through NULL), hang (never returns),
 * nan (one NaN in y), error (returns 5 with a message); shape changes y's shape when k >= 2048 (so sweeps over
 * k = 1024 run it as a correct kernel); ok is always correct.
 * x: (m, k), w: (n, k), y: (m, n), all fp32. */
#include <math.h>
#include <unistd.h>

#include "kvconf/plugin.h"
#include "sequential_gemm.h"

enum misbehaviour { OK, SEGV, HANG, NAN_OUT, ERROR_RC, SHAPE };
static const int modes[] = {OK, SEGV, HANG, NAN_OUT, ERROR_RC, SHAPE};

static int gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, size_t err_size) {
  const int mode = *(const int*)user;
  const int64_t m = x->shape[0], k = x->shape[1], n = w->shape[0];
  float* ys = (float*)y->data;
  sequential_gemm(x, w, y);
  if (k < 512 || (mode == SHAPE && k < 2048)) return 0;
  switch (mode) {
    case SEGV:
      *(volatile int*)0 = 1;
      break;
    case HANG:
      for (;;) pause();
    case NAN_OUT:
      ys[(m * n) / 2] = NAN;
      break;
    case ERROR_RC: {
      const char msg[] = "k too large for this kernel";
      size_t i = 0;
      for (; i + 1 < err_size && msg[i]; ++i) err[i] = msg[i];
      err[i] = '\0';
      return 5;
    }
    case SHAPE:
      y->shape[1] = n / 2;
      break;
    default:
      break;
  }
  return 0;
}

#define GEMM_DESC(NAME, MODE)                                                                                      \
  {                                                                                                                \
    NAME, KVCONF_KIND_GEMM, KVCONF_FP32, KVCONF_FP32, KVCONF_FP32, 0, 1, 0, NULL, (void*)&modes[MODE], gemm, NULL, \
        NULL, NULL, NULL, NULL, 0, 0                                                                               \
  }

static const struct kvconf_kernel_desc kernels[] = {
    GEMM_DESC("ok", OK),       GEMM_DESC("segv", SEGV),      GEMM_DESC("hang", HANG),
    GEMM_DESC("nan", NAN_OUT), GEMM_DESC("error", ERROR_RC), GEMM_DESC("shape", SHAPE),
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

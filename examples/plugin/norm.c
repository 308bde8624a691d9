/* The example RMSNorm, HF's pipeline in fp32: S = Σx² (sequential), r = 1/sqrt(S·(1/d) + eps), h = x·r;
 * Llama: y = fl_out(w · fl_out(h)); Gemma (one_plus_weight): y = fl_out(h · (1 + w)). x: (rows, d), w: (d). */
#include "example_kernels.h"
#include "fp_bits.h"

int ex_norm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, const struct kvconf_norm_params* p,
            char* err, size_t err_size) {
  (void)user;
  if (ex_check_layout(x, 2, "x", err, err_size) || ex_check_layout(w, 1, "w", err, err_size) ||
      ex_check_layout(y, 2, "y", err, err_size))
    return 1;
  const int64_t rows = x->shape[0], d = x->shape[1];
  const float inv_d = 1.0f / (float)d;
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (int64_t i = 0; i < d; ++i) {
      const float xi = ex_load(x, (size_t)(r * d + i));
      sum += xi * xi;
    }
    const float rho = 1.0f / sqrtf(sum * inv_d + p->eps);
    for (int64_t i = 0; i < d; ++i) {
      const float h = ex_load(x, (size_t)(r * d + i)) * rho;
      const float wi = ex_load(w, (size_t)i);
      const float v = p->one_plus_weight ? h * (1.0f + wi) : wi * ex_round_like(y, h);
      ex_store(y, (size_t)(r * d + i), v);
    }
  }
  return 0;
}

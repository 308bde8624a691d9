/* The example GEMM: y = x·Wᵀ with products and a sequential sum in fp32, one rounding to y's dtype.
 * x: (m, k), w: (n, k), y: (m, n). The wrong build (gemm_acc_fp16) rounds the running sum to fp16 every step. */
#include "example_kernels.h"
#include "fp_bits.h"

int ex_gemm(void* user, const DLTensor* x, const DLTensor* w, DLTensor* y, char* err, size_t err_size) {
  const struct ex_variant* v = (const struct ex_variant*)user;
  if (ex_check_layout(x, 2, "x", err, err_size) || ex_check_layout(w, 2, "w", err, err_size) ||
      ex_check_layout(y, 2, "y", err, err_size))
    return 1;
  const int64_t m = x->shape[0], k = x->shape[1], n = w->shape[0];
  if (w->shape[1] != k || y->shape[0] != m || y->shape[1] != n) {
    snprintf(err, err_size, "shapes do not match: x (%lld, %lld), w (%lld, %lld)", (long long)m, (long long)k,
             (long long)n, (long long)w->shape[1]);
    return 2;
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) {
        acc += ex_load(x, (size_t)(i * k + t)) * ex_load(w, (size_t)(j * k + t));
        if (v->gemm_acc_fp16) acc = ex_half_to_float(ex_float_to_half(acc));
      }
      ex_store(y, (size_t)(i * n + j), acc);
    }
  return 0;
}

/* The test plugins' GEMM arithmetic: y = x·Wᵀ in fp32, each output one sequential fp32 sum (x: (m, k), w: (n, k),
 * y: (m, n), compact fp32 DLTensors). */
#ifndef KVCONF_TEST_SEQUENTIAL_GEMM_H_
#define KVCONF_TEST_SEQUENTIAL_GEMM_H_

#include <dlpack/dlpack.h>
#include <stdint.h>

static inline void sequential_gemm(const DLTensor* x, const DLTensor* w, DLTensor* y) {
  const int64_t m = x->shape[0], k = x->shape[1], n = w->shape[0];
  const float* xs = (const float*)x->data;
  const float* ws = (const float*)w->data;
  float* ys = (float*)y->data;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t t = 0; t < k; ++t) acc += xs[i * k + t] * ws[j * k + t];
      ys[i * n + j] = acc;
    }
}

#endif /* KVCONF_TEST_SEQUENTIAL_GEMM_H_ */

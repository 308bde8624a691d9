// blocked_gemm (blocked_gemm.hpp): per output, each 64-term block summed in fp32, the block sums added in order.
#include "blocked_gemm.hpp"

namespace engine {
namespace {

constexpr std::size_t kBlock = 64;

float blocked_dot(const float* x, const float* w, std::size_t k, std::size_t blocks_end) {
  float total = 0.0f;
  for (std::size_t b = 0; b < blocks_end; b += kBlock) {
    float block = 0.0f;
    for (std::size_t t = b; t < b + kBlock && t < k; ++t) block += x[t] * w[t];
    total += block;
  }
  return total;
}

}  // namespace

void blocked_gemm(std::size_t m, std::size_t n, std::size_t k, std::span<const float> x, std::span<const float> w,
                  std::span<float> y, bool gemv_off_by_one) {
  if (m == 1) {                                                              // the GEMV path of decode steps
    const std::size_t end = gemv_off_by_one && k > kBlock ? k - kBlock : k;  // the bug: `b + kBlock < k`
    for (std::size_t j = 0; j < n; ++j) y[j] = blocked_dot(x.data(), w.data() + j * k, k, end);
    return;
  }
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) y[i * n + j] = blocked_dot(x.data() + i * k, w.data() + j * k, k, k);
}

}  // namespace engine

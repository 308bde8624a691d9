// The consumer's own kernel: y = x·Wᵀ in fp32, the reduction in blocks of 64 summed one after another, as a
// register-blocked CPU GEMM does; one-row calls (decode) take a GEMV path. `gemv_off_by_one` plants a classic bug in
// that path only: its block loop stops one block early, so decode drops the last 64 terms of every reduction.
#pragma once

#include <cstddef>
#include <span>

namespace engine {

void blocked_gemm(std::size_t m, std::size_t n, std::size_t k, std::span<const float> x, std::span<const float> w,
                  std::span<float> y, bool gemv_off_by_one);

}  // namespace engine

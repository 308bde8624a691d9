// Out-of-line parts of fast_fp.hpp.
#include "kvconf/kernels/fast_fp.hpp"

#include <atomic>

#include "kvconf/numerics/arith.hpp"

namespace kvconf::kernels {

float fma_format(Format f, float a, float b, float c) {
  switch (f) {
    case Format::fp32:
      return std::fmaf(a, b, c);
    case Format::fp16:
      return round_float(
          f, to_float_odd(std::fma(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c))));
    default:
      return static_cast<float>(kvconf::fma(f, a, b, c));
  }
}

namespace {
#if defined(KVCONF_HAVE_F16C)
std::atomic<bool> g_simd{true};
#else
std::atomic<bool> g_simd{false};
#endif
}  // namespace

bool simd_enabled() { return g_simd.load(std::memory_order_relaxed); }

void set_simd_enabled(bool on) {
#if defined(KVCONF_HAVE_F16C)
  g_simd.store(on, std::memory_order_relaxed);
#else
  (void)on;
#endif
}

}  // namespace kvconf::kernels

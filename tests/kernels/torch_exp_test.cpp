// PyTorch's vectorised exp_u20 (the exp of its CPU flash attention) measured against the budget the black-box
// attention bound charges for it: relative error kExpU20RelError (20 ulp of fp32) over every 64th float of
// [−125·ln 2, 0], where it does not flush, and |error| <= kExpU20RelError·e^x + kExpU20AbsError over [−104, 0),
// the flush included (exp_u20 returns 0 once its 2^(n−1) scale underflows, from x < −125.5·ln 2, above ln FLT_MIN).
#include <gtest/gtest.h>

#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kvconf/kernels/black_box.hpp"

namespace {

// One source, two executables (tests/kernels/CMakeLists.txt): the AVX2 and the AVX-512 build of exp_u20.
#if defined(CPU_CAPABILITY_AVX512)
#define KVCONF_EXP_SUITE TorchExpU20Avx512
bool cpu_has_it() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#else
#define KVCONF_EXP_SUITE TorchExpU20Avx2
bool cpu_has_it() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif
#define KVCONF_TEST_(suite, name) TEST(suite, name)  // expands the suite macro before TEST pastes it
#define KVCONF_TEST(suite, name) KVCONF_TEST_(suite, name)
#define KVCONF_SKIP_WITHOUT_ISA() \
  if (!cpu_has_it()) GTEST_SKIP() << "this CPU lacks the instructions of this exp_u20 build (torch uses the other)"

KVCONF_TEST(KVCONF_EXP_SUITE, WithinTheBudgetOverTheSoftmaxRange) {
  KVCONF_SKIP_WITHOUT_ISA();
  using Vec = at::vec::Vectorized<float>;
  const float lo = static_cast<float>(-125.0 * std::log(2.0));  // about −86.64: 2^(n−1) >= 2^-126 above it
  double worst = 0.0;
  float worst_x = 0.0f;
  std::size_t n = 0;
  float buf[Vec::size()];
  float out[Vec::size()];
  // Walk the float patterns of [lo, 0) downward from −0 in steps of 64 patterns.
  std::uint32_t bits = 0x80000001u;
  for (;;) {
    int filled = 0;
    for (; filled < Vec::size(); ++filled, bits += 64) {
      float x;
      std::memcpy(&x, &bits, sizeof x);
      if (!(x >= lo)) break;
      buf[filled] = x;
    }
    if (filled == 0) break;
    Vec::loadu(buf, filled).exp_u20().store(out, filled);
    for (int i = 0; i < filled; ++i, ++n) {
      const double exact = std::exp(static_cast<double>(buf[i]));
      const double rel = std::fabs(static_cast<double>(out[i]) - exact) / exact;
      if (rel > worst) {
        worst = rel;
        worst_x = buf[i];
      }
    }
    if (filled < Vec::size()) break;
  }
  std::printf(
      "exp_u20: %zu arguments in [%g, 0): max relative error %.3g (%.2f ulp of 2^-23) at x = %.9g; budget %.3g\n", n,
      static_cast<double>(lo), worst, worst / 0x1p-23, static_cast<double>(worst_x), kvconf::kernels::kExpU20RelError);
  RecordProperty("max_rel_error", std::to_string(worst));
  EXPECT_GT(n, 1000000u);
  EXPECT_LE(worst, kvconf::kernels::kExpU20RelError);
}

KVCONF_TEST(KVCONF_EXP_SUITE, TheFlushIsWithinTheAbsoluteBudget) {
  KVCONF_SKIP_WITHOUT_ISA();
  using Vec = at::vec::Vectorized<float>;
  float buf[Vec::size()], out[Vec::size()];
  double worst_excess = -1.0, largest_flushed = 0.0;
  float worst_x = 0.0f;
  std::size_t n = 0;
  // Every float of [−104, −80) (its flush zone and the range around it), in vectors.
  for (float x = -104.0f; x < -80.0f;) {
    int filled = 0;
    for (; filled < Vec::size() && x < -80.0f; ++filled, x = std::nextafter(x, 0.0f)) buf[filled] = x;
    Vec::loadu(buf, filled).exp_u20().store(out, filled);
    for (int i = 0; i < filled; ++i, ++n) {
      const double exact = std::exp(static_cast<double>(buf[i]));
      const double err = std::fabs(static_cast<double>(out[i]) - exact);
      const double excess = err - (kvconf::kernels::kExpU20RelError * exact + kvconf::kernels::kExpU20AbsError);
      if (out[i] == 0.0f) largest_flushed = std::max(largest_flushed, exact);
      if (excess > worst_excess || n == 0) {
        worst_excess = excess;
        worst_x = buf[i];
      }
    }
  }
  std::printf("exp_u20 on %zu floats of [-104, -80): largest e^x flushed to 0 = %.9g (2^%.3f); abs budget %.3g\n", n,
              largest_flushed, std::log2(largest_flushed), kvconf::kernels::kExpU20AbsError);
  RecordProperty("largest_flushed", std::to_string(largest_flushed));
  EXPECT_GT(largest_flushed, 0.0);  // the flush exists (else the abs budget is not exercised)
  EXPECT_LE(worst_excess, 0.0) << "at x = " << worst_x;
}

}  // namespace

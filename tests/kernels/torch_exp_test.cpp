// PyTorch's vectorised exp_u20 (the exp of its CPU flash attention) measured against the budget the black-box
// attention bound charges for it (kExpU20RelError, 20 ulp of fp32): the relative error over every 64th float in
// [ln(FLT_MIN), 0], the range softmax arguments x − max take, and the flush to 0 below it (exp_abs_error 2^-126).
#include <gtest/gtest.h>

#include <ATen/cpu/vec/vec.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kvconf/kernels/black_box.hpp"

namespace {

TEST(TorchExpU20, WithinTheBudgetOverTheSoftmaxRange) {
  using Vec = at::vec::Vectorized<float>;
  const float lo = std::log(FLT_MIN);  // about −87.34
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
  std::printf("exp_u20: %zu arguments in [%g, 0): max relative error %.3g (%.2f ulp of 2^-23) at x = %.9g; budget %.3g\n",
              n, static_cast<double>(lo), worst, worst / 0x1p-23, static_cast<double>(worst_x),
              kvconf::kernels::kExpU20RelError);
  RecordProperty("max_rel_error", std::to_string(worst));
  EXPECT_GT(n, 1000000u);
  EXPECT_LE(worst, kvconf::kernels::kExpU20RelError);
}

TEST(TorchExpU20, BelowFltMinTheFlushIsUnderTheAbsoluteBudget) {
  using Vec = at::vec::Vectorized<float>;
  float buf[Vec::size()], out[Vec::size()];
  for (int i = 0; i < Vec::size(); ++i) buf[i] = -88.0f - static_cast<float>(i);
  Vec::loadu(buf).exp_u20().store(out);
  for (int i = 0; i < Vec::size(); ++i)
    EXPECT_LE(std::fabs(static_cast<double>(out[i]) - std::exp(static_cast<double>(buf[i]))), 0x1p-126) << buf[i];
}

}  // namespace

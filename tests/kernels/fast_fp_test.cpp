// Unit tests of the kernels' fast float-format operations (kernels/fast_fp.hpp) against numerics' correctly
// rounded round_to / arith: float → fp16 exhaustively around every fp16 value (the value, both neighbouring
// midpoints and the floats next to them), float → bf16 likewise, every float pattern in the *Slow* case;
// random operands for round-to-odd, the fp16/bf16/fp32 FMAs (scalar and 8-lane), adds, products and rsqrt.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kvconf/kernels/fast_fp.hpp"
#include "kvconf/numerics/arith.hpp"
#include "kvconf/numerics/rounding.hpp"
#include "test_support.hpp"

namespace kvconf::kernels {
namespace {

using namespace kvconf::test;

bool same_f(float a, double b) { return same(static_cast<double>(a), b); }

// Floats at and around every value v of format f: v, v's float neighbours, the midpoints to the next value
// of f and the floats next to them.
std::vector<float> probes(Format f) {
  std::vector<float> p;
  const int bits = info(f).bits;
  for (std::uint32_t b = 0; b < (1u << bits); ++b) {
    const double v = decode(f, b);
    if (!std::isfinite(v)) continue;
    const float fv = static_cast<float>(v);
    p.push_back(fv);
    p.push_back(std::nextafter(fv, HUGE_VALF));
    p.push_back(std::nextafter(fv, -HUGE_VALF));
    const double up = decode(f, b + 1 < (1u << bits) ? b + 1 : b);
    if (std::isfinite(up) && up != v) {
      const float mid = static_cast<float>((v + up) / 2);  // exact: one more bit than f
      p.push_back(mid);
      p.push_back(std::nextafter(mid, HUGE_VALF));
      p.push_back(std::nextafter(mid, -HUGE_VALF));
    }
  }
  for (float s : {HUGE_VALF, -HUGE_VALF, std::numeric_limits<float>::quiet_NaN(), 65520.0f, -65520.0f, 65519.996f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()})
    p.push_back(s);
  return p;
}

TEST(FastFp, RoundFp16AroundEveryFp16Value) {
  Failures f;
  const auto p = probes(Format::fp16);
  for (std::size_t i = 0; i < p.size(); ++i) {
    ++f.checked;
    const double expect = round_to(Format::fp16, static_cast<double>(p[i]));
    if (!same_f(round_fp16(p[i]), expect)) f.add("round_fp16(" + hex(p[i]) + ") != " + hex(expect));
  }
#if defined(KVCONF_HAVE_F16C)
  for (std::size_t i = 0; i + 8 <= p.size(); i += 8) {
    alignas(32) float out[8];
    _mm256_store_ps(out, round_fp16_x8(_mm256_loadu_ps(p.data() + i)));
    for (int l = 0; l < 8; ++l) {
      ++f.checked;
      if (!same_f(out[l], round_to(Format::fp16, static_cast<double>(p[i + l]))))
        f.add("round_fp16_x8(" + hex(p[i + l]) + ")");
    }
  }
#endif
  f.expect_none("float -> fp16");
}

TEST(FastFp, RoundBf16AroundEveryBf16Value) {
  Failures f;
  const auto p = probes(Format::bf16);
  for (std::size_t i = 0; i < p.size(); ++i) {
    ++f.checked;
    const double expect = round_to(Format::bf16, static_cast<double>(p[i]));
    if (!same_f(round_bf16(p[i]), expect) && !(std::isnan(p[i]) && std::isnan(round_bf16(p[i]))))
      f.add("round_bf16(" + hex(p[i]) + ") != " + hex(expect));
  }
#if defined(KVCONF_HAVE_F16C)
  for (std::size_t i = 0; i + 8 <= p.size(); i += 8) {
    alignas(32) float out[8];
    _mm256_store_ps(out, round_bf16_x8(_mm256_loadu_ps(p.data() + i)));
    for (int l = 0; l < 8; ++l) {
      ++f.checked;
      if (std::bit_cast<std::uint32_t>(out[l]) != std::bit_cast<std::uint32_t>(round_bf16(p[i + l])))
        f.add("round_bf16_x8(" + hex(p[i + l]) + ") differs from round_bf16");
    }
  }
#endif
  f.expect_none("float -> bf16");
}

// Every float pattern (2^32): round_fp16 / round_bf16 and their 8-lane forms against round_to.
TEST(FastFp, SlowEveryFloatPattern) {
  Failures f;
  std::uint64_t b = 0;
  alignas(32) float in[8], o16[8], ob[8];
  while (b < (1ull << 32)) {
    for (int l = 0; l < 8; ++l) in[l] = std::bit_cast<float>(static_cast<std::uint32_t>(b + l));
#if defined(KVCONF_HAVE_F16C)
    _mm256_store_ps(o16, round_fp16_x8(_mm256_load_ps(in)));
    _mm256_store_ps(ob, round_bf16_x8(_mm256_load_ps(in)));
#else
    for (int l = 0; l < 8; ++l) o16[l] = round_fp16(in[l]), ob[l] = round_bf16(in[l]);
#endif
    for (int l = 0; l < 8; ++l) {
      const double x = in[l];
      f.checked += 2;
      if (!same_f(o16[l], round_to(Format::fp16, x)) || !same_f(round_fp16(in[l]), round_to(Format::fp16, x)))
        f.add("fp16 of " + hexbits(b + l));
      if (!std::isnan(x) && !same_f(ob[l], round_to(Format::bf16, x))) f.add("bf16 of " + hexbits(b + l));
    }
    b += 8;
  }
  f.expect_none("every float pattern");
}

// Random fp16 / bf16 / fp32 operands over a wide exponent range, with exact cancellations and near-ties.
struct Gen {
  std::mt19937_64 rng;
  explicit Gen(std::uint64_t s) : rng(s) {}
  double value(Format f) {
    std::uniform_int_distribution<int> e(f == Format::fp16 ? -26 : -40, f == Format::fp16 ? 8 : 40);
    std::normal_distribution<double> g(0.0, 1.0);
    return round_to(f, std::ldexp(g(rng), e(rng)));
  }
};

TEST(FastFp, FmaMatchesArith) {
  Failures fl;
  fl.set_seed(test_seed());
  Gen g(test_seed());
  std::uniform_int_distribution<int> pick(0, 3);
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) {
    for (int i = 0; i < 200000; ++i) {
      const double a = g.value(f), b = g.value(f);
      double c = g.value(f);
      if (pick(g.rng) == 0) c = round_to(f, -a * b);  // (near) cancellation
      if (pick(g.rng) == 0)
        c = round_to(
            f, std::ldexp(1.0, static_cast<int>(std::ilogb(a * b + 1e-300)) + 12));  // tiny product next to a big c
      const float r = fma_format(f, static_cast<float>(a), static_cast<float>(b), static_cast<float>(c));
      const double expect = fma(f, a, b, c);
      ++fl.checked;
      if (!same_f(r, expect) && !(std::isnan(r) && std::isnan(expect)))
        fl.add(std::string(name(f)) + " fma(" + hex(a) + ", " + hex(b) + ", " + hex(c) + ") = " + hex(r) +
               ", expected " + hex(expect));
    }
  }
  fl.expect_none("fma_format");
}

#if defined(KVCONF_HAVE_F16C)
TEST(FastFp, Fp16FmaX8MatchesArith) {
  Failures fl;
  fl.set_seed(test_seed());
  Gen g(test_seed());
  std::uniform_int_distribution<int> pick(0, 3);
  alignas(32) float a[8], b[8], c[8], r[8];
  for (int i = 0; i < 100000; ++i) {
    for (int l = 0; l < 8; ++l) {
      a[l] = static_cast<float>(g.value(Format::fp16));
      b[l] = static_cast<float>(g.value(Format::fp16));
      c[l] = static_cast<float>(g.value(Format::fp16));
      const int k = pick(g.rng);
      if (k == 0) c[l] = static_cast<float>(round_to(Format::fp16, -static_cast<double>(a[l]) * b[l]));
      if (k == 1) {  // c a power of two and a·b a quarter / half ulp of it: ties and near-ties
        c[l] = 1.0f;
        a[l] = static_cast<float>(round_to(Format::fp16, std::ldexp(1.0 + l / 1024.0, -11 - (l % 3))));
        b[l] = l % 2 ? 1.0f : -1.0f;
      }
    }
    _mm256_store_ps(r, fma_fp16_x8(_mm256_load_ps(a), _mm256_load_ps(b), _mm256_load_ps(c)));
    for (int l = 0; l < 8; ++l) {
      const double expect = fma(Format::fp16, a[l], b[l], c[l]);
      ++fl.checked;
      if (!same_f(r[l], expect))
        fl.add("fma_fp16_x8(" + hex(a[l]) + ", " + hex(b[l]) + ", " + hex(c[l]) + ") = " + hex(r[l]) + ", expected " +
               hex(expect));
    }
  }
  fl.expect_none("fma_fp16_x8");
}
#endif

TEST(FastFp, AddMulAndRoundToOdd) {
  Failures fl;
  fl.set_seed(test_seed());
  Gen g(test_seed() + 1);
  for (const Format f : {Format::fp16, Format::bf16, Format::fp32}) {
    for (int i = 0; i < 100000; ++i) {
      const double a = g.value(f), b = g.value(f);
      fl.checked += 2;
      if (!same_f(add_format(f, static_cast<float>(a), static_cast<float>(b)), add(f, a, b)))
        fl.add("add " + hex(a) + " " + hex(b));
      if (!same_f(mul_format(f, static_cast<float>(a), static_cast<float>(b)), mul(f, a, b)))
        fl.add("mul " + hex(a) + " " + hex(b));
    }
  }
  std::mt19937_64 rng(test_seed() + 2);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> e(-160, 120);
  RoundOptions odd;
  odd.mode = Rounding::to_odd;
  for (int i = 0; i < 200000; ++i) {
    const double d = std::ldexp(u(rng), e(rng));
    ++fl.checked;
    if (!same_f(to_float_odd(d), round_to(Format::fp32, d, odd))) fl.add("to_float_odd(" + hex(d) + ")");
    ++fl.checked;
    if (!same_f(round_double(Format::fp16, d), round_to(Format::fp16, d))) fl.add("round_double fp16 " + hex(d));
    ++fl.checked;
    if (!same_f(round_double(Format::bf16, d), round_to(Format::bf16, d))) fl.add("round_double bf16 " + hex(d));
  }
  fl.expect_none("add/mul/round-to-odd");
}

// rsqrt_f32: relative error <= kExpRelError against 1/sqrt evaluated by MPFR at 200 bits.
TEST(FastFp, RsqrtWithinItsStatedError) {
  std::mt19937_64 rng(test_seed());
  std::uniform_real_distribution<double> u(1.0, 2.0);
  std::uniform_int_distribution<int> e(-120, 120);
  mpfr_t t;
  mpfr_init2(t, 200);
  double worst = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const float x = static_cast<float>(std::ldexp(u(rng), e(rng)));
    mpfr_set_flt(t, x, MPFR_RNDN);
    mpfr_rec_sqrt(t, t, MPFR_RNDN);
    const double exact = mpfr_get_d(t, MPFR_RNDN);
    const double rel = std::fabs(static_cast<double>(rsqrt_f32(x)) - exact) / exact;
    worst = std::max(worst, rel);
    ASSERT_LE(rel, kExpRelError) << "x = " << hex(x);
  }
  mpfr_clear(t);
  std::printf("[   info   ] rsqrt_f32: max relative error %.3g (stated bound %.3g)\n", worst, kExpRelError);
}

TEST(FastFp, SimdSwitch) {
  const bool saved = simd_enabled();
  set_simd_enabled(false);
  EXPECT_FALSE(simd_enabled());
  set_simd_enabled(true);
#if defined(KVCONF_HAVE_F16C)
  EXPECT_TRUE(simd_enabled());
#else
  EXPECT_FALSE(simd_enabled());
#endif
  set_simd_enabled(saved);
}

}  // namespace
}  // namespace kvconf::kernels

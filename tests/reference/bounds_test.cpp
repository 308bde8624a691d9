// Tests of the a-priori error bounds (reference/bounds.hpp) against the accumulation primitives of
// numerics/accumulate.hpp: on random and adversarial data the measured error (against an exact MPFR
// reference) never exceeds the bound, and the ratio measured/bound is reported so that a uselessly
// loose bound is visible. Also: the Higham–Mary probabilistic bound (violation counts), and the
// per-element attention bound against an emulated fp16 attention and a >= 200-bit Boost.MPFR reference.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kvconf/numerics/accumulate.hpp"
#include "kvconf/numerics/arith.hpp"
#include "kvconf/reference/bounds.hpp"
#include "test_support.hpp"
#include "kvconf/reference/mpfr_format.hpp"

namespace kvconf::ref {
namespace {

using namespace kvconf::test;

// ---------------------------------------------------------------------------------------------------
// Exact reference of a dot product whose products are exact in double (fp16/bf16 inputs): mpfr_sum.
class ExactDot {
 public:
  explicit ExactDot(std::size_t cap) : vals_(cap + 1) {
    for (auto& v : vals_) mpfr_init2(&v, 64);
    ptrs_.resize(cap + 1);
    for (std::size_t i = 0; i <= cap; ++i) ptrs_[i] = &vals_[i];
    mpfr_init2(acc_, 128);
  }
  ~ExactDot() {
    for (auto& v : vals_) mpfr_clear(&v);
    mpfr_clear(acc_);
  }
  ExactDot(const ExactDot&) = delete;
  ExactDot& operator=(const ExactDot&) = delete;

  void set(const std::vector<double>& x, const std::vector<double>& y) {
    n_ = x.size();
    max_abs_ = 0.0;
    for (std::size_t i = 0; i < n_; ++i) {
      const double p = x[i] * y[i];
      EXPECT_EQ(std::fma(x[i], y[i], -p), 0.0) << "product not exact in double";
      mpfr_set_d(&vals_[i], std::fabs(p), MPFR_RNDN);
      max_abs_ = std::max({max_abs_, std::fabs(x[i]), std::fabs(y[i])});
    }
    mpfr_sum(acc_, ptrs_.data(), n_, MPFR_RNDU);
    sum_abs_ = mpfr_get_d(acc_, MPFR_RNDU);
    for (std::size_t i = 0; i < n_; ++i) mpfr_set_d(&vals_[i], x[i] * y[i], MPFR_RNDN);
  }
  // |result − x·y|, rounded up.
  double error(double result) {
    mpfr_set_d(&vals_[n_], -result, MPFR_RNDN);
    mpfr_sum(acc_, ptrs_.data(), n_ + 1, MPFR_RNDA);
    mpfr_abs(acc_, acc_, MPFR_RNDN);
    return mpfr_get_d(acc_, MPFR_RNDU);
  }
  double sum_abs() const { return sum_abs_; }
  double max_abs() const { return max_abs_; }

 private:
  std::vector<__mpfr_struct> vals_;
  std::vector<mpfr_ptr> ptrs_;
  mpfr_t acc_;
  std::size_t n_ = 0;
  double sum_abs_ = 0.0, max_abs_ = 0.0;
};

// ---------------------------------------------------------------------------------------------------
// Unit checks of the bound formulas.

TEST(Bounds, UnitConstantsAndGamma) {
  EXPECT_EQ(unit_roundoff(Format::fp16), p2(-11));
  EXPECT_EQ(unit_roundoff(Format::fp32, {Rounding::toward_zero}), p2(-23));
  EXPECT_EQ(underflow_unit(Format::fp16), p2(-25));
  EXPECT_EQ(underflow_unit(Format::fp16, {Rounding::toward_zero}), p2(-24));
  RoundOptions ftz;
  ftz.ftz = true;
  EXPECT_EQ(underflow_unit(Format::fp16, ftz), p2(-14));
  // fp64: half the subnormal spacing (2^-1075) is not a double; the bound must not round it to 0.
  EXPECT_EQ(underflow_unit(Format::fp64), p2(-1074));
  EXPECT_EQ(gamma(0, p2(-11)), 0.0);
  EXPECT_EQ(gamma(1, p2(-11)), p2(-11) / (1 - p2(-11)));
  EXPECT_EQ(gamma(2047, p2(-11)), 2047.0);        // 2047u/(1 − 2047u) = 2047·2^-11 / 2^-11
  EXPECT_TRUE(std::isinf(gamma(2048, p2(-11))));  // fp16, n >= 2048: vacuous
  EXPECT_TRUE(std::isinf(gamma(256, p2(-8))));    // bf16, n >= 256: vacuous
}

TEST(Bounds, RoundingCountsPerOrder) {
  const AccumSpec f32 = spec_of(Format::fp16, Format::fp32, Format::fp32);
  const AccumSpec f16 = spec_of(Format::fp16, Format::fp16, Format::fp16);
  EXPECT_EQ(roundings_per_term(f32, Sequential{}, 100), 99u);  // fp16 products are exact in fp32
  EXPECT_EQ(roundings_per_term(f16, Sequential{}, 100), 100u);
  EXPECT_EQ(roundings_per_term(f32, Pairwise{}, 100), 7u);
  EXPECT_EQ(roundings_per_term(f32, Pairwise{}, 128), 7u);
  EXPECT_EQ(roundings_per_term(f32, Pairwise{}, 129), 8u);
  EXPECT_EQ(roundings_per_term(f32, Blocked{32}, 100), 31u + 3u);
  EXPECT_EQ(roundings_per_term(f32, SplitK{4}, 10), 2u + 3u);  // L = 3, 4 slices
  EXPECT_EQ(roundings_per_term(f32, SplitK{4, SplitKCombine::slices_rounded_to_output}, 10), 2u);
  EXPECT_EQ(roundings_per_term(f16, Sequential{}, 100, false), 99u);  // a sum: leaves exact in fp16
  EXPECT_THROW(roundings_per_term(f32, TensorCore{}, 10), std::invalid_argument);
  EXPECT_THROW(roundings_per_term(f32, Blocked{0}, 10), std::invalid_argument);
  // Blocked with a tree inside: ceil(log2 b) in the block, then the sequential sum of the blocks.
  EXPECT_EQ(roundings_per_term(f32, Blocked{1024, true}, 4096), 10u + 3u);
  EXPECT_EQ(roundings_per_term(f32, Blocked{1024, true}, 100), 7u);
  // ThreadStrided (docs/TOLERANCES.md §1). llama.cpp fp32 GEMV, K = 4096, T = 256, groups of 2: thread 0's
  // chain holds 8 visits × 2 terms (15 roundings), then log2 32 + log2 8 = 8 tree levels.
  ThreadStrided g3;
  g3.threads = 256;
  g3.vec = 2;
  EXPECT_EQ(roundings_per_term(f32, g3, 4096), 15u + 8u);
  // half2 lanes in fp16 (8 terms each; the leaf counts: fp16 products are not exact in fp16), combined in
  // fp32: 1 lane addition + 8 levels in fp32, reported separately.
  ThreadStrided h2 = g3;
  h2.split_lanes = true;
  h2.combine = Format::fp32;
  const ThreadStridedRoundings r = thread_strided_roundings(f16, h2, 4096);
  EXPECT_EQ(r.acc, 1u + 7u);
  EXPECT_EQ(r.combine, 1u + 8u);
  EXPECT_EQ(roundings_per_term(f16, h2, 4096), 8u);
  // PyTorch row reduction, 512 threads, float4 lanes: chains of 2, 3 lane additions, log2 512 = 9 levels.
  ThreadStrided r1;
  r1.threads = 512;
  r1.vec = 4;
  r1.split_lanes = true;
  r1.tree = ThreadTree::block_first;
  EXPECT_EQ(roundings_per_term(f32, r1, 4096), 1u + 3u + 9u);
  // Few terms: K = 100, T = 64: 50 groups, thread 0 one visit of 2 terms; 5 + 1 levels (the padding is exact).
  ThreadStrided t64 = g3;
  t64.threads = 64;
  EXPECT_EQ(roundings_per_term(f32, t64, 100), 1u + 6u);
  // Combine narrower than acc: the conversion counts.
  ThreadStrided narrow = g3;
  narrow.combine = Format::fp16;
  EXPECT_EQ(thread_strided_roundings(f32, narrow, 4096).combine, 8u + 1u);
  t64.threads = 48;
  EXPECT_THROW(roundings_per_term(f32, t64, 10), std::invalid_argument);
}

TEST(Bounds, DotTermsMatchTheFormulas) {
  const std::size_t n = 1000;
  const ErrorTerms t = dot_error_terms(spec_of(Format::fp16, Format::fp32, Format::fp32), Sequential{}, n);
  EXPECT_EQ(t.rel, gamma(n - 1, p2(-24)) * kSafety);
  // Final rounding to fp16 composes as (1+γ)(1+u16) − 1.
  const double g = gamma(n - 1, p2(-24));
  const ErrorTerms t16 = dot_error_terms(spec_of(Format::fp16, Format::fp32, Format::fp16), Sequential{}, n);
  EXPECT_EQ(t16.rel, (g * (1 + p2(-11)) + p2(-11)) * kSafety);
  // Vacuous deterministic constants give +inf, never a finite wrong number.
  const AccumSpec h = spec_of(Format::fp16, Format::fp16, Format::fp16);
  EXPECT_TRUE(std::isinf(dot_error_bound(h, Sequential{}, 4096, 1.0)));
  EXPECT_TRUE(std::isfinite(dot_error_bound(h, Pairwise{}, 4096, 1.0)));
  EXPECT_TRUE(std::isinf(dot_error_bound(spec_of(Format::bf16, Format::bf16, Format::bf16), Sequential{}, 300, 1.0)));
  // Tensor core, H100, fp32: first order (n/k)·((k+1)·2^-25 + 2^-23).
  const double tc = dot_error_terms(spec_of(Format::fp16, Format::fp32, Format::fp32), TensorCore{}, 4096, 4.0).rel;
  const double first = 256.0 * (17 * p2(-25) + p2(-23));
  EXPECT_GT(tc, first);
  EXPECT_LT(tc, first * 1.001);
  // Subnormal-input floor F = 2^emin·max|x| = 2^-14·4 per block: abs ≈ 256·(17·2^-25)·2^-12.
  const double tc_abs = dot_error_terms(spec_of(Format::fp16, Format::fp32, Format::fp32), TensorCore{}, 4096, 4.0).abs;
  EXPECT_GT(tc_abs, 256.0 * 17 * p2(-37));
  EXPECT_LT(tc_abs, 256.0 * 17 * p2(-37) * 1.001);
  EXPECT_THROW(dot_error_terms(spec_of(Format::fp16, Format::bf16, Format::bf16), TensorCore{}, 16),
               std::invalid_argument);
}

TEST(Bounds, HighamMaryConstants) {
  // notes/numerics.md §1.2: n = 4096, δ = 1e-6 gives λ ≈ 6.76, λ√n ≈ 432.
  const double l = higham_mary_lambda(4096, 1e-6, p2(-11));
  EXPECT_NEAR(l, 6.76, 0.01);
  EXPECT_NEAR(l * 64, 432, 1.0);
  EXPECT_GT(higham_mary_gamma(100, l, p2(-11)), l * 10 * p2(-11));
  EXPECT_THROW(higham_mary_lambda(10, 0.0, p2(-11)), std::invalid_argument);
  EXPECT_THROW(probabilistic_dot_error_terms(spec_of(Format::fp16, Format::fp32, Format::fp32), TensorCore{}, 16, 1e-3),
               std::invalid_argument);
  EXPECT_THROW(
      probabilistic_dot_error_terms(spec_of(Format::fp16, Format::fp32, Format::fp32, true, Rounding::toward_zero),
                                    Sequential{}, 16, 1e-3),
      std::invalid_argument);
  // Much smaller than the deterministic bound at large n.
  const AccumSpec s = spec_of(Format::fp16, Format::fp32, Format::fp32);
  EXPECT_LT(probabilistic_dot_error_bound(s, Sequential{}, 4096, 1.0, 1e-6),
            dot_error_bound(s, Sequential{}, 4096, 1.0) / 5);
}

// Constructed inputs on which each rounding loses (almost) its maximum: the bound must hold and be nearly
// attained, so a constant made too small (u for 2u, a dropped term) fails here even when random data
// would not reveal it.
double adversarial_ratio(const AccumSpec& s, const Order& o, const std::vector<double>& x,
                         const std::vector<double>& y) {
  ExactDot exact(x.size());
  exact.set(x, y);
  const double err = exact.error(dot(s, o, x, y));
  const double bound = dot_error_bound(s, o, x.size(), exact.sum_abs(), exact.max_abs());
  EXPECT_LE(err, bound) << order_name(o);
  return err / bound;
}

TEST(Bounds, AdversarialCasesNearlyAttainTheBound) {
  const std::size_t n = 1000;
  // RN, fp32 accumulator: 1 + 2^-24 is a tie that rounds back to 1, every time: error (n−1)·u.
  std::vector<double> x(n, p2(-24)), y(n, 1.0);
  x[0] = 1.0;
  const double rn = adversarial_ratio(spec_of(Format::fp16, Format::fp32, Format::fp32), Sequential{}, x, y);
  EXPECT_GT(rn, 0.99);
  // RZ, fp32 accumulator: each term (1 − 2^-11)·2^-23 is just under one ulp of 1 and is cut away: error
  // (n−1)·(1 − 2^-11)·2u — this is why directed rounding needs 2u.
  std::fill(x.begin(), x.end(), 1.0 - p2(-11));
  std::fill(y.begin(), y.end(), p2(-23));
  x[0] = y[0] = 1.0;
  const double rz = adversarial_ratio(spec_of(Format::fp16, Format::fp32, Format::fp32, true, Rounding::toward_zero),
                                      Sequential{}, x, y);
  EXPECT_GT(rz, 0.99);
  // RN, fp16 accumulator, 99 ties of 2^-11 against 1 (m = 100: fp16 products are not provably exact in
  // fp16, so the leaf rounding is counted): ratio 0.99·(1 − 100u)/(1 + 99u) ≈ 0.898.
  std::vector<double> x16(100, p2(-11)), y16(100, 1.0);
  x16[0] = 1.0;
  const double h = adversarial_ratio(spec_of(Format::fp16, Format::fp16, Format::fp16), Sequential{}, x16, y16);
  EXPECT_GT(h, 0.89);
  // H100 tensor core: c = 1 stays 1 — per block 15 products (1 − 2^-11)·2^-25 are truncated away
  // (quantum 2^-25) and 1 + 3·2^-25 is cut back to 1 by RZ: 18 of the 21 quanta per block the bound allows.
  const std::size_t blocks = 64, k = 16;
  std::vector<double> xt(blocks * k, 0.5 * (1.0 - p2(-11))), yt(blocks * k, p2(-24));
  for (std::size_t b = 0; b < blocks; ++b) xt[b * k] = 1.5;  // 1.5·2^-24 = 3·2^-25, kept, then lost to RZ
  xt[0] = yt[0] = 1.0;
  const double tc = adversarial_ratio(spec_of(Format::fp16, Format::fp32, Format::fp32), TensorCore{}, xt, yt);
  EXPECT_GT(tc, 0.8);
  std::printf("adversarial measured/bound: fp32 RN ties %.4f, fp32 RZ %.4f, fp16 RN ties %.4f, H100 TC %.4f\n", rn, rz,
              h, tc);
  ::testing::Test::RecordProperty("adversarial.fp32_rn", std::to_string(rn));
  ::testing::Test::RecordProperty("adversarial.fp32_rz", std::to_string(rz));
  ::testing::Test::RecordProperty("adversarial.fp16_rn", std::to_string(h));
  ::testing::Test::RecordProperty("adversarial.h100_tc", std::to_string(tc));
}

// ---------------------------------------------------------------------------------------------------
// The sweep: every primitive, formats, lengths, distributions. Measured error <= bound, ratio reported.

enum class Dist { normal, uniform_pos, cancel, wide, tiny };
const char* dist_name(Dist d) {
  switch (d) {
    case Dist::normal:
      return "N(0,1)";
    case Dist::uniform_pos:
      return "U(0,1)";
    case Dist::cancel:
      return "cancel";
    case Dist::wide:
      return "wide";
    case Dist::tiny:
      return "tiny";
  }
  return "?";
}

void generate(Format in, Dist dist, std::size_t n, std::mt19937_64& rng, std::vector<double>& x,
              std::vector<double>& y) {
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  x.assign(n, 0.0);
  y.assign(n, 0.0);
  const int E = in == Format::fp16 ? 8 : 40;
  std::uniform_int_distribution<int> ew(-E, E), e3(-3, 3);
  switch (dist) {
    case Dist::normal:
      for (std::size_t i = 0; i < n; ++i) x[i] = g(rng), y[i] = g(rng);
      break;
    case Dist::uniform_pos:
      for (std::size_t i = 0; i < n; ++i) x[i] = u(rng), y[i] = u(rng);
      break;
    case Dist::cancel: {
      // Second half cancels the first almost exactly: κ = Σ|xy| / |x·y| is large.
      const std::size_t h = n / 2;
      for (std::size_t i = 0; i < h; ++i) {
        x[i] = round_to(in, std::ldexp(g(rng), e3(rng)));
        y[i] = round_to(in, g(rng));
        x[h + i] = -x[i];
        y[h + i] = y[i] * (1.0 + p2(-7) * (2.0 * u(rng) - 1.0));
      }
      if (n % 2) x[n - 1] = p2(-10) * g(rng), y[n - 1] = g(rng);
      break;
    }
    case Dist::wide:
      for (std::size_t i = 0; i < n; ++i) {
        x[i] = (u(rng) < 0.5 ? -1 : 1) * std::ldexp(1.0 + u(rng), ew(rng));
        y[i] = (u(rng) < 0.5 ? -1 : 1) * std::ldexp(1.0 + u(rng), ew(rng) / 2);
      }
      break;
    case Dist::tiny: {
      // Products and partial sums around the subnormal range of a same-width accumulator (underflow):
      // fp16 values ~2^-7 (products ~2^-14 = fp16's smallest normal), bf16 values ~2^-63 (products ~2^-126).
      const int e = in == Format::fp16 ? -7 : -63;
      for (std::size_t i = 0; i < n; ++i) x[i] = std::ldexp(g(rng), e), y[i] = std::ldexp(g(rng), e);
      break;
    }
  }
  for (std::size_t i = 0; i < n; ++i) x[i] = round_to(in, x[i]), y[i] = round_to(in, y[i]);
  if (in == Format::fp16) {
    // Keep every partial sum of an fp16 accumulator far from overflow: Σ|x_i y_i| <= 2^14.
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += std::fabs(x[i] * y[i]);
    if (s > p2(14)) {
      const int k = static_cast<int>(std::ceil(std::log2(s / p2(14))));
      for (auto& v : x) v = round_to(in, std::ldexp(v, -k));
    }
  }
}

struct SpecCase {
  const char* name;
  AccumSpec spec;
};

std::vector<SpecCase> spec_cases(Format in) {
  if (in == Format::fp16)
    return {{"f16.a16.o16", spec_of(Format::fp16, Format::fp16, Format::fp16)},
            {"f16.a16.o16.nofma", spec_of(Format::fp16, Format::fp16, Format::fp16, false)},
            {"f16.a32.o32", spec_of(Format::fp16, Format::fp32, Format::fp32)},
            {"f16.a32.o16", spec_of(Format::fp16, Format::fp32, Format::fp16)},
            {"f16.a32.o32.rz", spec_of(Format::fp16, Format::fp32, Format::fp32, true, Rounding::toward_zero)},
            {"f16.a16.o16.ftz", [] {
               AccumSpec f = spec_of(Format::fp16, Format::fp16, Format::fp16);
               f.round.ftz = true;
               return f;
             }()}};
  return {{"b16.ab16.ob16", spec_of(Format::bf16, Format::bf16, Format::bf16)},
          {"b16.a32.o32", spec_of(Format::bf16, Format::fp32, Format::fp32)},
          {"b16.a32.ob16", spec_of(Format::bf16, Format::fp32, Format::bf16)}};
}

std::vector<Order> orders_for(const AccumSpec& s) {
  // GPU block reductions (notes/kernels.md §7): llama.cpp GEMV (fp32 sums; half2 lanes combined in fp32),
  // PyTorch's row reduction (float4 lanes; vt0 = 4 interleaved accumulators), and chunked trees (R2).
  ThreadStrided gemv;
  gemv.threads = 64;
  gemv.vec = 2;
  ThreadStrided half2 = gemv;
  half2.split_lanes = true;
  half2.combine = Format::fp32;
  ThreadStrided rows4;
  rows4.threads = 32;
  rows4.vec = 4;
  rows4.split_lanes = true;
  rows4.tree = ThreadTree::block_first;
  ThreadStrided vt4;
  vt4.threads = 64;
  vt4.interleave = 4;
  vt4.tree = ThreadTree::block_first;
  std::vector<Order> o{
      Sequential{},      Pairwise{}, Blocked{32}, SplitK{4}, SplitK{3, SplitKCombine::slices_rounded_to_output},
      Blocked{32, true}, gemv,       half2,       rows4,     vt4};
  const bool tc_ok =
      (s.acc == Format::fp32 || s.acc == Format::fp16) && s.round.mode == Rounding::nearest_even && !s.round.ftz;
  if (tc_ok) {
    if (s.in == Format::fp16) o.push_back(TensorCore{TensorCoreParams::v100()});
    o.push_back(TensorCore{TensorCoreParams::a100()});
    o.push_back(TensorCore{TensorCoreParams::h100()});
    o.push_back(SplitK{4, SplitKCombine::accumulator, TensorCoreParams::h100()});
  }
  return o;
}

struct Stat {
  std::vector<double> ratios;
  bool vacuous = false;
  double worst = 0.0;
  const char* worst_dist = "-";
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

void run_sweep(const std::vector<std::pair<std::size_t, int>>& lengths_trials, std::uint64_t seed_base) {
  // key: (spec, order) -> n -> stat
  std::map<std::string, std::map<std::size_t, Stat>> table;
  std::vector<std::string> row_order;
  long evaluations = 0;
  std::size_t cap = 0;
  for (const auto& [n, t] : lengths_trials) cap = std::max(cap, n);
  ExactDot exact(cap), exact_sum(cap);
  std::vector<double> x, y, ones(cap, 1.0);
  for (Format in : {Format::fp16, Format::bf16}) {
    const auto specs = spec_cases(in);
    for (Dist dist : {Dist::normal, Dist::uniform_pos, Dist::cancel, Dist::wide, Dist::tiny}) {
      for (const auto& [n, trials] : lengths_trials) {
        const std::uint64_t seed = seed_base ^ (std::uint64_t(in) << 40) ^ (std::uint64_t(dist) << 32) ^ n;
        std::mt19937_64 rng(seed);
        for (int trial = 0; trial < trials; ++trial) {
          generate(in, dist, n, rng, x, y);
          ones.assign(n, 1.0);
          const bool with_sums = trial % 4 == 0;
          exact.set(x, y);
          for (const auto& sc : specs) {
            for (const Order& o : orders_for(sc.spec)) {
              if (with_sums && !std::holds_alternative<TensorCore>(o)) {
                // The plain sum Σ x_i in the same order: exact reference via y = 1.
                exact_sum.set(x, ones);
                const double rs = sum(sc.spec, o, x);
                const double es = exact_sum.error(rs);
                const double bs = sum_error_bound(sc.spec, o, n, exact_sum.sum_abs(), exact_sum.max_abs());
                ASSERT_LE(es, bs) << "sum bound violated: spec " << sc.name << " order " << order_name(o) << " n=" << n
                                  << " dist " << dist_name(dist) << " trial " << trial;
                const std::string skey = std::string(sc.name) + " " + order_name(o) + " SUM";
                if (!table.count(skey)) row_order.push_back(skey);
                Stat& ss = table[skey][n];
                if (std::isinf(bs)) {
                  ss.vacuous = true;
                } else {
                  ss.ratios.push_back(es / bs);
                  if (es / bs >= ss.worst) ss.worst = es / bs, ss.worst_dist = dist_name(dist);
                }
                ++evaluations;
              }
              const double r = dot(sc.spec, o, x, y);
              ASSERT_TRUE(std::isfinite(r)) << sc.name << " " << order_name(o) << " n=" << n << " overflowed";
              const double err = exact.error(r);
              const double bound = dot_error_bound(sc.spec, o, n, exact.sum_abs(), exact.max_abs());
              ASSERT_LE(err, bound) << "bound violated: spec " << sc.name << " order " << order_name(o) << " n=" << n
                                    << " dist " << dist_name(dist) << " trial " << trial << " seed " << seed
                                    << " sum_abs " << exact.sum_abs();
              const std::string key = std::string(sc.name) + " " + order_name(o);
              if (!table.count(key)) row_order.push_back(key);
              Stat& st = table[key][n];
              if (std::isinf(bound)) {
                st.vacuous = true;
              } else {
                const double ratio = err / bound;
                st.ratios.push_back(ratio);
                if (ratio >= st.worst) st.worst = ratio, st.worst_dist = dist_name(dist);
              }
              ++evaluations;
            }
          }
        }
      }
    }
  }
  std::printf(
      "\nmeasured error / bound per (spec, order, n): max<worst distribution: N(0,1) U(0,1) cancel wide "
      "tiny> / median over all distributions; 'inf' = bound vacuous (gamma_m with m*u >= 1); "
      "SUM = plain sum of x\n");
  std::printf("%-38s", "spec order");
  for (const auto& [n, t] : lengths_trials) std::printf(" %22s", ("n=" + std::to_string(n)).c_str());
  std::printf("\n");
  for (const auto& key : row_order) {
    std::printf("%-38s", key.c_str());
    for (const auto& [n, t] : lengths_trials) {
      const Stat& st = table[key][n];
      char cell[64];
      if (st.ratios.empty()) {
        std::snprintf(cell, sizeof cell, "inf");
      } else {
        std::snprintf(cell, sizeof cell, "%.2e%c/%.1e%s", st.worst, st.worst_dist[0], median(st.ratios),
                      st.vacuous ? "*" : "");
        std::string prop = key + " n" + std::to_string(n);
        std::replace(prop.begin(), prop.end(), ' ', '.');
        ::testing::Test::RecordProperty("ratio_max." + prop, cell);
      }
      std::printf(" %22s", cell);
    }
    std::printf("\n");
  }
  std::printf("(%ld evaluations; '*' = vacuous for some trials)\n", evaluations);
}

TEST(BoundsSweep, MeasuredErrorNeverExceedsBound) {
  run_sweep({{16, 300}, {128, 100}, {1024, 16}, {4096, 6}}, 0x5eedULL);
}

TEST(BoundsSweep, SlowMeasuredErrorNeverExceedsBound) {
  run_sweep({{16, 3000}, {128, 1000}, {1024, 160}, {4096, 60}, {16384, 12}}, 0xabcdULL);
}

// ---------------------------------------------------------------------------------------------------
// Higham–Mary: with λ chosen for failure probability δ, the number of trials whose error exceeds the
// probabilistic bound must be what a Binomial(T, δ) count allows (threshold with tail < 1e-9).

int binomial_threshold(int trials, double delta, double tail) {
  // Smallest k with P(X > k) < tail for X ~ Binomial(trials, delta).
  double pk = std::pow(1.0 - delta, trials);  // P(X = 0)
  double cdf = pk;
  int k = 0;
  while (1.0 - cdf >= tail && k < trials) {
    pk *= (static_cast<double>(trials - k) / (k + 1)) * (delta / (1.0 - delta));
    cdf += pk;
    ++k;
  }
  return k;
}

void run_higham_mary(std::size_t n, int trials, Dist dist, const Order& order, double delta) {
  const AccumSpec s = spec_of(Format::fp16, Format::fp16, Format::fp16);
  ExactDot exact(n);
  std::mt19937_64 rng(0x4a11 ^ n ^ (std::uint64_t(dist) << 20));
  std::vector<double> x, y;
  int violations = 0, det_violations = 0;
  double worst = 0.0;
  for (int t = 0; t < trials; ++t) {
    generate(Format::fp16, dist, n, rng, x, y);
    exact.set(x, y);
    const double err = exact.error(dot(s, order, x, y));
    const double pb = probabilistic_dot_error_bound(s, order, n, exact.sum_abs(), delta);
    const double db = dot_error_bound(s, order, n, exact.sum_abs());
    if (err > pb) ++violations;
    if (err > db) ++det_violations;
    worst = std::max(worst, err / pb);
  }
  const int allowed = binomial_threshold(trials, delta, 1e-9);
  std::printf("Higham-Mary %s n=%zu %s delta=%g: %d/%d violations (allowed %d), max error/bound %.3f\n",
              order_name(order).c_str(), n, dist_name(dist), delta, violations, trials, allowed, worst);
  ::testing::Test::RecordProperty(
      "hm." + order_name(order) + ".n" + std::to_string(n) + "." + dist_name(dist) + ".max_ratio",
      std::to_string(worst));
  EXPECT_LE(violations, allowed);
  EXPECT_EQ(det_violations, 0);
}

TEST(HighamMary, ViolationsWithinFailureProbability) {
  run_higham_mary(128, 2000, Dist::normal, Sequential{}, 1e-3);
  run_higham_mary(128, 2000, Dist::uniform_pos, Sequential{}, 1e-3);
  run_higham_mary(128, 1000, Dist::uniform_pos, Pairwise{}, 1e-3);
  run_higham_mary(1024, 300, Dist::normal, Sequential{}, 1e-2);
}

TEST(HighamMary, SlowViolationsWithinFailureProbability) {
  run_higham_mary(128, 50000, Dist::uniform_pos, Sequential{}, 1e-3);
  run_higham_mary(1024, 5000, Dist::normal, Sequential{}, 1e-3);
  run_higham_mary(1024, 5000, Dist::uniform_pos, Blocked{32}, 1e-3);
}

// ---------------------------------------------------------------------------------------------------
// Attention: fp16 Q, K, V; fp32 scores (sequential FMA) and softmax; P cast to fp16; fp32 PV; fp16 output.
// Reference: Boost.Multiprecision mpfr_float with 61 decimal digits (>= 200 bits), whose own error
// (~n·2^-200 relative) is negligible next to any bound here.

using mp = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<61>, boost::multiprecision::et_off>;

double up(const mp& v) { return mpfr_get_d(v.backend().data(), MPFR_RNDU); }

enum class Pipeline { normalized_seq, flash2_unnormalized, normalized_tc_h100 };
const char* pipeline_name(Pipeline p) {
  switch (p) {
    case Pipeline::normalized_seq:
      return "P=fl16(softmax), PV fp32 seq";
    case Pipeline::flash2_unnormalized:
      return "FA2: fl16(exp), PV fp32, /l";
    case Pipeline::normalized_tc_h100:
      return "P=fl16(softmax), PV H100 TC";
  }
  return "?";
}

// exp correctly rounded at 64 bits (MPFR), then rounded to fp32: |ê − e^x| <= (2^-24 + 2^-63)·e^x + η.
double exp_fp32(double x) {
  mpfr_t t;
  mpfr_init2(t, 64);
  mpfr_set_d(t, x, MPFR_RNDN);
  mpfr_exp(t, t, MPFR_RNDN);
  const double r = round_mpfr(Format::fp32, t);
  mpfr_clear(t);
  return r;
}

struct AttnResult {
  double worst_ratio = 0.0;
  double median_ratio = 0.0;
};

AttnResult run_attention_case(std::size_t n, std::size_t d, bool v_positive, double q_scale, std::uint64_t seed,
                              Pipeline pipe, int rows) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const Format f16 = Format::fp16, f32 = Format::fp32;
  std::vector<std::vector<double>> K(n, std::vector<double>(d)), V(n, std::vector<double>(d));
  double max_k = 0.0, max_v = 0.0;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < d; ++i) {
      K[j][i] = round_to(f16, g(rng));
      V[j][i] = round_to(f16, v_positive ? 0.5 + u(rng) : g(rng));
      max_k = std::max(max_k, std::fabs(K[j][i]));
      max_v = std::max(max_v, std::fabs(V[j][i]));
    }
  const AccumSpec qk_spec = spec_of(f16, f32, f32);
  const AccumSpec pv_spec = spec_of(f16, f32, f32);
  const AccumSpec row_spec = spec_of(f32, f32, f32);
  const Order pv_order =
      pipe == Pipeline::normalized_tc_h100 ? Order{TensorCore{TensorCoreParams::h100()}} : Order{Sequential{}};
  const bool normalized = pipe != Pipeline::flash2_unnormalized;

  // τ = 1/sqrt(d): exact for d = 64; otherwise τ̂ = fl32(τ) with |τ̂ − τ| <= 2^-24·τ, and the bound gets
  // an upper bound of τ.
  mp tau_mp = 1 / boost::multiprecision::sqrt(mp(static_cast<double>(d)));
  const double tau_hat = round_to(f32, static_cast<double>(tau_mp));  // fp32 value used by the kernel
  const bool tau_exact = mp(tau_hat) == tau_mp;
  const double tau_up = tau_exact ? tau_hat : up(tau_mp);
  const double tau_rel = tau_exact ? 0.0 : p2(-24);

  std::vector<double> ratios;
  std::vector<double> col(n);
  for (int r = 0; r < rows; ++r) {
    std::vector<double> q(d);
    double max_q = 0.0;
    for (auto& v : q) v = round_to(f16, q_scale * g(rng)), max_q = std::max(max_q, std::fabs(v));

    // --- emulation ---
    const double max_abs_qk = std::max(max_q, max_k);
    std::vector<double> s_hat(n);
    for (std::size_t j = 0; j < n; ++j) s_hat[j] = mul(f32, tau_hat, dot(qk_spec, Sequential{}, q, K[j]));
    const double m_hat = *std::max_element(s_hat.begin(), s_hat.end());
    std::vector<double> e_hat(n), w(n);
    for (std::size_t j = 0; j < n; ++j) e_hat[j] = exp_fp32(sub(f32, s_hat[j], m_hat));
    const double l_hat = sum(row_spec, Sequential{}, e_hat);
    for (std::size_t j = 0; j < n; ++j) w[j] = round_to(f16, normalized ? div(f32, e_hat[j], l_hat) : e_hat[j]);
    std::vector<double> o_hat(d);
    for (std::size_t c = 0; c < d; ++c) {
      for (std::size_t j = 0; j < n; ++j) col[j] = V[j][c];
      double acc = dot(pv_spec, pv_order, w, col);
      if (!normalized) acc = div(f32, acc, l_hat);
      o_hat[c] = round_to(f16, acc);
    }

    // --- reference (>= 200 bits) and condition quantities ---
    std::vector<mp> s(n);
    double delta_s = 0.0;
    const ErrorTerms qk_terms = dot_error_terms(qk_spec, Sequential{}, d, max_abs_qk);
    for (std::size_t j = 0; j < n; ++j) {
      mp dot_exact = 0, abs_sum = 0;
      for (std::size_t i = 0; i < d; ++i) {
        const mp prod = mp(q[i]) * K[j][i];
        dot_exact += prod;
        abs_sum += abs(prod);
      }
      s[j] = tau_mp * dot_exact;
      ScoreErrorInputs si;
      si.qk = qk_terms;
      si.sum_abs_qk = up(abs_sum);
      si.abs_qk = up(abs(dot_exact));
      si.tau = tau_up;
      si.tau_rel_error = tau_rel;
      delta_s = std::max(delta_s, score_error_bound(si));
    }
    const mp smax = *std::max_element(s.begin(), s.end());
    const mp smin = *std::min_element(s.begin(), s.end());
    std::vector<mp> p(n);
    mp L = 0;
    for (std::size_t j = 0; j < n; ++j) L += (p[j] = exp(s[j] - smax));
    for (auto& v : p) v /= L;

    SoftmaxErrorInputs smi;
    smi.n = n;
    smi.score_range = up(smax - smin) + 2 * delta_s;
    smi.fmt = f32;
    smi.exp_rel_error = p2(-24) + p2(-63);
    smi.row_sum = sum_error_terms(row_spec, Sequential{}, n);
    smi.normalize_before_pv = normalized;
    AttentionErrorInputs ai;
    ai.delta_s = delta_s;
    ai.softmax = softmax_errors(smi);
    ai.p_cast = f16;
    ai.pv = dot_error_terms(pv_spec, pv_order, n, std::max(1.0, max_v));
    if (!normalized) ai.divide = f32;
    ai.out = f16;
    for (std::size_t c = 0; c < d; ++c) {
      mp o = 0, sum_abs_v = 0;
      for (std::size_t j = 0; j < n; ++j) o += p[j] * V[j][c], sum_abs_v += std::fabs(V[j][c]);
      mp spread = 0, wabs = 0;
      for (std::size_t j = 0; j < n; ++j) spread += p[j] * abs(V[j][c] - o), wabs += p[j] * std::fabs(V[j][c]);
      ai.spread = up(spread);
      ai.weighted_abs = up(wabs);
      ai.abs_o = up(abs(o));
      ai.sum_abs_v = up(sum_abs_v);
      const double bound = attention_error_bound(ai);
      const double err = up(abs(mp(o_hat[c]) - o));
      EXPECT_TRUE(std::isfinite(bound));
      EXPECT_LE(err, bound) << pipeline_name(pipe) << " n=" << n << " d=" << d << " row " << r << " col " << c
                            << " seed " << seed << " delta_s " << delta_s;
      ratios.push_back(err / bound);
    }
  }
  return {*std::max_element(ratios.begin(), ratios.end()), median(ratios)};
}

void run_attention(const std::vector<std::size_t>& ns, int rows) {
  std::printf("\nattention |o_hat - o| / bound (max / median over rows and columns)\n");
  std::printf("%-30s %6s %5s %-8s %6s %22s\n", "pipeline", "n", "d", "V", "qscale", "max/median");
  for (Pipeline pipe : {Pipeline::normalized_seq, Pipeline::flash2_unnormalized, Pipeline::normalized_tc_h100})
    for (std::size_t n : ns)
      for (std::size_t d : {64u, 128u})
        for (bool vpos : {false, true})
          for (double qs : {1.0, 4.0}) {
            const std::uint64_t seed = 0xa77e ^ (n << 8) ^ (d << 24) ^ (vpos ? 1u : 0u) ^ (qs > 1 ? 2u : 0u);
            const AttnResult r = run_attention_case(n, d, vpos, qs, seed, pipe, rows);
            std::printf("%-30s %6zu %5zu %-8s %6.0f %13.2e/%.1e\n", pipeline_name(pipe), n, d,
                        vpos ? "U(.5,1.5)" : "N(0,1)", qs, r.worst_ratio, r.median_ratio);
            char key[128];
            std::snprintf(key, sizeof key, "attn.%d.n%zu.d%zu.%s.q%.0f.max_ratio", static_cast<int>(pipe), n, d,
                          vpos ? "vpos" : "vnorm", qs);
            ::testing::Test::RecordProperty(key, std::to_string(r.worst_ratio));
          }
}

TEST(AttentionBound, EmulatedFp16AttentionWithinBound) { run_attention({64, 256, 1024}, 2); }

TEST(AttentionBound, SlowEmulatedFp16AttentionWithinBound) { run_attention({64, 512, 2048, 4096}, 6); }

TEST(AttentionBound, FirstOrderShape) {
  // With every error source off but the output rounding, the bound is u_out·|o| + η_out.
  AttentionErrorInputs ai;
  ai.abs_o = 0.5;
  ai.weighted_abs = 1.0;
  ai.out = Format::fp16;
  const double base = p2(-11) * 0.5 + p2(-25);
  EXPECT_GE(attention_error_bound(ai), base);
  EXPECT_NEAR(attention_error_bound(ai), base, base * 1e-5);  // kSafety = 1 + 2^-20
  // Score errors weigh the spread of V around o, not |V|: spread 0 (constant V) gives no Δs term.
  ai.delta_s = 1e-3;
  EXPECT_NEAR(attention_error_bound(ai), base, base * 1e-5);
  ai.spread = 1.0;
  EXPECT_NEAR(attention_error_bound(ai), 2e-3 + p2(-11) * 0.5, 1e-5);
  ai.softmax.norm_rel = 1.0;
  EXPECT_TRUE(std::isinf(attention_error_bound(ai)));
}

}  // namespace
}  // namespace kvconf::ref
